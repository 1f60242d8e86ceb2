package kubeadm

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// gzB64 is n zero bytes, gzipped and base64-encoded: a few MiB become KiBs.
func gzB64(t testing.TB, content []byte, zeros int) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(content); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for left := zeros; left > 0; left -= len(chunk) {
		if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func cloudConfig(entries ...string) []byte {
	var b strings.Builder
	b.WriteString("#cloud-config\nwrite_files:\n")
	for i, e := range entries {
		fmt.Fprintf(&b, "- path: /f%d\n  encoding: gz+b64\n  content: %s\n", i, e)
	}
	return []byte(b.String())
}

func ignitionWith(entries ...string) []byte {
	files := make([]string, 0, len(entries))
	for i, e := range entries {
		files = append(files, fmt.Sprintf(`{"path":"/f%d","contents":{"compression":"gzip","source":"data:;base64,%s"}}`, i, e))
	}
	return []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[` + strings.Join(files, ",") + `]}}`)
}

// allocatedBy returns how many bytes f allocates in all.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxParseAlloc is what one Parse may allocate in all, whatever the data:
// the bounded decompression buffer grows to one file's bound (about twice
// that in all, doubling), plus the document itself and its parse.
const maxParseAlloc = 2*MaxBootstrapFileBytes + 8<<20

// Bootstrap data that inflates (issue 28: 679 KiB of cloud-config grew the
// process by 2.8 GiB) is refused at the bound, and never costs more memory
// than the bound, one file or many.
func TestBootstrapDataThatInflatesIsRefusedWithinTheBound(t *testing.T) {
	join := []byte("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n")
	big := gzB64(t, nil, 64<<20)                           // one file past the per-file bound
	justUnder := gzB64(t, nil, MaxBootstrapFileBytes-4096) // under it, but six are past the total
	joinAfterPadding := gzB64(t, join, 0)
	tests := []struct {
		name    string
		data    []byte
		format  string
		tooBig  bool
		wantErr bool
	}{
		{name: "one 64 MiB gzip bomb in cloud-config", data: cloudConfig(big), format: FormatCloudConfig, tooBig: true},
		{name: "files each under the bound but together past it", data: cloudConfig(justUnder, justUnder, justUnder, justUnder, justUnder, justUnder), format: FormatCloudConfig, tooBig: true},
		{name: "one 64 MiB gzip bomb in Ignition", data: ignitionWith(big), format: FormatIgnition, tooBig: true},
		{name: "kubeadm's file after a large but bounded one is still found", data: cloudConfig(justUnder, joinAfterPadding), format: FormatCloudConfig},
		{name: "a large file without kubeadm's configuration is not kubeadm data", data: cloudConfig(justUnder), format: FormatCloudConfig, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(len(tt.data)).To(BeNumerically("<", 1<<20), "the input fits in a Secret")
			var b *Bootstrap
			var err error
			n := allocatedBy(func() { b, err = Parse(tt.data, tt.format) })
			g.Expect(n).To(BeNumerically("<", maxParseAlloc), "allocated %d MiB", n>>20)
			switch {
			case tt.tooBig:
				g.Expect(err).To(MatchError(ErrTooLarge))
				g.Expect(err).To(MatchError(ErrNotKubeadm))
			case tt.wantErr:
				g.Expect(err).To(MatchError(ErrNotKubeadm))
			default:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(b.Role).To(Equal(JoinWorker))
			}
		})
	}
}
