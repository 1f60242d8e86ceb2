package docker

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func gzipped(s string) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return buf.Bytes()
}

func TestParseCloudConfigWriteFiles(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("secret\n"))
	gzb64 := base64.StdEncoding.EncodeToString(gzipped("zipped\n"))

	tests := []struct {
		name        string
		data        string
		wantPath    string
		wantContent string
		wantMode    fs.FileMode
		wantAppend  bool
		wantOwner   string
	}{
		{
			name:        "a plain file gets cloud-init's default mode 0644",
			data:        "#cloud-config\nwrite_files:\n- path: /etc/plain\n  content: hello\n",
			wantPath:    "/etc/plain",
			wantContent: "hello",
			wantMode:    0o644,
		},
		{
			name:        "b64 content is decoded and quoted permissions are octal",
			data:        "write_files:\n- path: /etc/b64\n  encoding: b64\n  permissions: '0600'\n  owner: root:root\n  content: " + b64 + "\n",
			wantPath:    "/etc/b64",
			wantContent: "secret\n",
			wantMode:    0o600,
			wantOwner:   "root:root",
		},
		{
			name:        "base64 is the same as b64",
			data:        "write_files:\n- path: /etc/base64\n  encoding: base64\n  content: " + b64 + "\n",
			wantPath:    "/etc/base64",
			wantContent: "secret\n",
			wantMode:    0o644,
		},
		{
			name:        "gz+b64 content is decoded then decompressed",
			data:        "write_files:\n- path: /etc/gz\n  encoding: gz+b64\n  content: " + gzb64 + "\n",
			wantPath:    "/etc/gz",
			wantContent: "zipped\n",
			wantMode:    0o644,
		},
		{
			name:        "unquoted YAML octal permissions are read as octal",
			data:        "write_files:\n- path: /etc/octal\n  permissions: 0640\n  content: x\n",
			wantPath:    "/etc/octal",
			wantContent: "x",
			wantMode:    0o640,
		},
		{
			name:        "0o-prefixed permissions are octal",
			data:        "write_files:\n- path: /etc/oo\n  permissions: '0o750'\n  content: x\n",
			wantPath:    "/etc/oo",
			wantContent: "x",
			wantMode:    0o750,
		},
		{
			name:        "append is kept and a relative path becomes absolute",
			data:        "write_files:\n- path: etc/app\n  append: true\n  content: more\n",
			wantPath:    "/etc/app",
			wantContent: "more",
			wantMode:    0o644,
			wantAppend:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg, err := parseCloudConfig([]byte(tt.data), "host")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.WriteFiles).To(HaveLen(1))
			f := cfg.WriteFiles[0]
			g.Expect(f.filePath()).To(Equal(tt.wantPath))
			content, err := f.decode()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(content)).To(Equal(tt.wantContent))
			g.Expect(f.mode()).To(Equal(tt.wantMode))
			g.Expect(f.Append).To(Equal(tt.wantAppend))
			g.Expect(f.Owner).To(Equal(tt.wantOwner))
		})
	}
}

func TestParseCloudConfigRunCmd(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []string
	}{
		{
			name: "string commands are kept as shell scripts, in order",
			data: "runcmd:\n- kubeadm init --config /run/kubeadm/kubeadm.yaml\n- 'echo done > /run/x'\n",
			want: []string{"kubeadm init --config /run/kubeadm/kubeadm.yaml", "echo done > /run/x"},
		},
		{
			name: "list commands are quoted for the shell",
			data: "runcmd:\n- [sh, -c, \"echo 'hi there'\"]\n- [ls, /tmp]\n",
			want: []string{`sh -c 'echo '"'"'hi there'"'"''`, "ls /tmp"},
		},
		{
			name: "no runcmd runs nothing",
			data: "#cloud-config\nwrite_files: []\n",
			want: nil,
		},
		{
			name: "jinja host name variables are replaced by the node's host name",
			data: "## template: jinja\n#cloud-config\nruncmd:\n- echo {{ ds.meta_data.hostname }} {{ v1.local_hostname }}\n",
			want: []string{"echo node-1 node-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cfg, err := parseCloudConfig([]byte(tt.data), "node-1")
			g.Expect(err).NotTo(HaveOccurred())
			var got []string
			for _, c := range cfg.RunCmd {
				got = append(got, c.Script)
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestParseCloudConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr string
	}{
		{name: "empty data is refused", data: "  \n", wantErr: "bootstrap data is empty"},
		{name: "a shell script is refused", data: "#!/bin/sh\necho hi\n", wantErr: "not a cloud-config"},
		{name: "invalid YAML is refused without quoting it", data: "write_files: [\n- sec: ret", wantErr: "not a valid cloud-config"},
		{name: "an unknown encoding is refused", data: "write_files:\n- path: /x\n  encoding: rot13\n  content: x\n", wantErr: `unknown encoding "rot13"`},
		{name: "invalid base64 is refused", data: "write_files:\n- path: /x\n  encoding: b64\n  content: '***'\n", wantErr: "not valid base64"},
		{name: "a file without a path is refused", data: "write_files:\n- content: x\n", wantErr: "has no path"},
		{name: "permissions that are not octal are refused", data: "write_files:\n- path: /x\n  permissions: rw-r--r--\n", wantErr: "not an octal file mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := parseCloudConfig([]byte(tt.data), "host")
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(err.Error()).NotTo(ContainSubstring("ret"))
		})
	}
}

// A gzip bomb (1 KiB that inflates to 17 MiB) is refused before it is
// inflated whole, and so are many entries that add up.
func TestParseCloudConfigBoundsDecompressedContent(t *testing.T) {
	g := NewWithT(t)
	bomb := func(size int) string {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(make([]byte, size))
		_ = w.Close()
		return base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	one := bomb(MaxBootstrapFileBytes + 1)
	g.Expect(len(one)).To(BeNumerically("<", 64<<10), "the bomb is small")
	_, err := parseCloudConfig([]byte("write_files:\n- path: /x\n  encoding: gz+b64\n  content: "+one+"\n"), "host")
	g.Expect(err).To(MatchError("write_files entry /x decompresses to more than 16 MiB"))

	var many strings.Builder
	many.WriteString("write_files:\n")
	part := bomb(MaxBootstrapFileBytes)
	for i := range 5 {
		fmt.Fprintf(&many, "- path: /f%d\n  encoding: gzip+base64\n  content: %s\n", i, part)
	}
	_, err = parseCloudConfig([]byte(many.String()), "host")
	g.Expect(err).To(MatchError("bootstrap data decodes to more than 64 MiB of write_files"))

	_, err = parseCloudConfig([]byte("write_files:\n- path: /x\n  encoding: gz+b64\n  content: "+bomb(MaxBootstrapFileBytes)+"\n"), "host")
	g.Expect(err).NotTo(HaveOccurred(), "exactly the limit is fine")
}

func TestContainerName(t *testing.T) {
	long := "a-very-long-machine-name-that-goes-on-and-on-and-on-for-ever-and-ever"
	tests := []struct {
		name  string
		parts []string
		want  string
	}{
		{name: "short names are namespace-cluster-machine", parts: []string{"default", "c1", "m1"}, want: "default-c1-m1"},
		{name: "characters Docker refuses become dashes", parts: []string{"ns", "c 1", "m/1"}, want: "ns-c-1-m-1"},
		{name: "a name starting with a refused character gets a prefix", parts: []string{"_ns", "c", "m"}, want: "c-ns-c-m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(containerName(tt.parts...)).To(Equal(tt.want))
		})
	}

	t.Run("long names are cut to 63 characters and stay unique", func(t *testing.T) {
		g := NewWithT(t)
		a := containerName("default", "cluster", long+"-a")
		b := containerName("default", "cluster", long+"-b")
		g.Expect(len(a)).To(BeNumerically("<=", maxNameLength))
		g.Expect(len(b)).To(BeNumerically("<=", maxNameLength))
		g.Expect(a).NotTo(Equal(b))
		g.Expect(a).To(HavePrefix("default-cluster-a-very-long"))
	})
	t.Run("the hashed name differs from the plain one and is stable", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(hashedName("ns", "c", "lb")).NotTo(Equal(containerName("ns", "c", "lb")))
		g.Expect(hashedName("ns", "c", "lb")).To(Equal(hashedName("ns", "c", "lb")))
		g.Expect(hashedName("ns-c", "lb")).NotTo(Equal(hashedName("ns", "c-lb")))
	})
}

// FuzzParseCloudConfig feeds arbitrary bootstrap data (random and mutated
// cloud-configs) to the parser: no panic, and a refusal never quotes the
// data (bootstrap data holds secrets). `make fuzz` runs it for long.
func FuzzParseCloudConfig(f *testing.F) {
	f.Add([]byte("#cloud-config\nwrite_files:\n- path: /etc/x\n  permissions: '0600'\n  encoding: b64\n  content: aGk=\nruncmd:\n- [kubeadm, init]\n- echo hi\n"))
	f.Add([]byte("## template: jinja\n#cloud-config\nwrite_files:\n- path: /etc/{{ ds.meta_data.hostname }}\n  content: x\n"))
	f.Add([]byte("write_files:\n- path: /x\n  encoding: gz+b64\n  content: H4sIAAAAAAAA/w==\n"))
	f.Add([]byte("#!/bin/sh\n"))
	f.Add([]byte("runcmd: [[1, 2], {a: b}]\n"))
	const secret = "s3cr3t-t0ken"
	f.Fuzz(func(t *testing.T, data []byte) {
		withSecret := append(append([]byte{}, data...), []byte("\n# "+secret+"\n")...)
		_, err := parseCloudConfig(withSecret, "host")
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Fatalf("the error quotes the bootstrap data: %v", err)
		}
		_, _ = parseCloudConfig(data, "host")
	})
}
