package kubeadm

import (
	"errors"
	"os"
	"runtime"
	"testing"
)

// FuzzParse feeds kubeadm.Parse cloud-config and Ignition data (CABPK's
// own, gzip bombs, and what the fuzzer makes of them): it never panics,
// answers kubeadm data or an error wrapping ErrNotKubeadm (or a decoding
// error), and allocates no more than the decoding bound allows, per input.
func FuzzParse(f *testing.F) {
	r := newCABPK()
	f.Add(r.init(f), false)
	f.Add(r.join(f, true), false)
	f.Add(r.join(f, false), false)
	for _, name := range []string{"testdata/ignition-init.json", "testdata/ignition-join-worker.json"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, true)
	}
	join := []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n")
	f.Add(cloudConfig(gzB64(f, join, 0)), false)
	f.Add(cloudConfig(gzB64(f, nil, 32<<20)), false)
	f.Add(ignitionWith(gzB64(f, nil, 32<<20)), true)
	f.Add([]byte("#cloud-config\nwrite_files:\n- content: &a [*a, *a]\n"), false)
	f.Add([]byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/x","contents":{"source":"data:,kubeadm.k8s.io%0Akind:%20InitConfiguration"}}]}}`), true)
	f.Fuzz(func(t *testing.T, data []byte, ignition bool) {
		format := FormatCloudConfig
		if ignition {
			format = FormatIgnition
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b, err := Parse(data, format)
		runtime.ReadMemStats(&after)
		// The decoding bound, plus what parsing the document itself may
		// take: a generous multiple of its size.
		if n, limit := after.TotalAlloc-before.TotalAlloc, uint64(maxParseAlloc+256*len(data)); n > limit {
			t.Fatalf("Parse of %d bytes allocated %d bytes, more than %d", len(data), n, limit)
		}
		if err == nil && (b == nil || b.Role == "") {
			t.Fatalf("Parse answered no error and no role: %+v", b)
		}
		if err != nil && b != nil {
			t.Fatalf("Parse answered both %+v and %v", b, err)
		}
		if errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrNotKubeadm) {
			t.Fatalf("a bound error must say the data is not kubeadm's: %v", err)
		}
	})
}
