package docker

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// cloudConfig is the part of a cloud-config the backend runs: what Cluster
// API's kubeadm bootstrap provider emits. Other modules are ignored, as a
// node container has no use for them (users, ntp, disks).
type cloudConfig struct {
	WriteFiles []cloudConfigFile `json:"write_files"`
	RunCmd     []cloudConfigCmd  `json:"runcmd"`
}

// cloudConfigFile is one entry of write_files.
type cloudConfigFile struct {
	Path        string          `json:"path"`
	Content     string          `json:"content"`
	Encoding    string          `json:"encoding"`
	Owner       string          `json:"owner"`
	Permissions filePermissions `json:"permissions"`
	Append      bool            `json:"append"`
}

// filePermissions is an octal mode written as a string ("0640", "0o640")
// or, unquoted in YAML, a number YAML already read as octal.
type filePermissions struct {
	Mode fs.FileMode
	Set  bool
}

func (p *filePermissions) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var n int64
	if err := json.Unmarshal(data, &n); err == nil {
		if n < 0 || n > 0o7777 {
			return fmt.Errorf("permissions %d are out of range", n)
		}
		*p = filePermissions{Mode: fs.FileMode(n), Set: true}
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("permissions must be an octal string: %w", err)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O")
	n, err := strconv.ParseInt(s, 8, 32)
	if err != nil || n < 0 || n > 0o7777 {
		return fmt.Errorf("permissions %q are not an octal file mode", s)
	}
	*p = filePermissions{Mode: fs.FileMode(n), Set: true}
	return nil
}

// cloudConfigCmd is one entry of runcmd: a shell string, or a list of
// arguments (quoted here, so that both run through sh -c).
type cloudConfigCmd struct {
	Script string
}

func (c *cloudConfigCmd) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		c.Script = s
		return nil
	}
	var args []any
	if err := json.Unmarshal(data, &args); err != nil {
		return fmt.Errorf("a runcmd entry must be a string or a list: %w", err)
	}
	quoted := make([]string, 0, len(args))
	for _, a := range args {
		var s string
		switch v := a.(type) {
		case string:
			s = v
		case nil:
			s = ""
		default:
			s = fmt.Sprint(v)
		}
		quoted = append(quoted, shellQuote(s))
	}
	c.Script = strings.Join(quoted, " ")
	return nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// jinjaHostname matches the host name variables cloud-init's jinja
// templates offer ({{ ds.meta_data.hostname }}, {{ v1.local_hostname }}...).
var jinjaHostname = regexp.MustCompile(`\{\{\s*(ds\.meta_data\.(local_)?hostname|v1\.(local_)?hostname|local_hostname)\s*\}\}`)

// parseCloudConfig reads cloud-config bootstrap data. Data that starts
// with "## template: jinja" has its host name variables replaced by
// hostname, as cloud-init would.
func parseCloudConfig(data []byte, hostname string) (cloudConfig, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return cloudConfig{}, fmt.Errorf("bootstrap data is empty")
	}
	if bytes.HasPrefix(trimmed, []byte("#!")) {
		return cloudConfig{}, fmt.Errorf("bootstrap data is a script, not a cloud-config: the docker backend runs cloud-config only")
	}
	if bytes.HasPrefix(trimmed, []byte("## template: jinja")) {
		data = jinjaHostname.ReplaceAll(data, []byte(hostname))
	}
	var cfg cloudConfig
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		// The error quotes no content: bootstrap data holds secrets.
		return cloudConfig{}, fmt.Errorf("bootstrap data is not a valid cloud-config: %w", err)
	}
	var total int
	for i, f := range cfg.WriteFiles {
		if strings.TrimSpace(f.Path) == "" {
			return cloudConfig{}, fmt.Errorf("write_files entry %d has no path", i+1)
		}
		content, err := f.decode()
		if err != nil {
			return cloudConfig{}, err
		}
		// Many small gzip entries must not add up to what one may not be.
		if total += len(content); total > MaxBootstrapBytes {
			return cloudConfig{}, fmt.Errorf("bootstrap data decodes to more than %d MiB of write_files", MaxBootstrapBytes>>20)
		}
	}
	return cfg, nil
}

// Limits of decoded bootstrap data. A Secret holds at most 1 MiB, but gzip
// expands about a thousandfold: unbounded, one Secret could take gigabytes
// of the manager every machine shares. kubeadm's files are kilobytes.
const (
	// MaxBootstrapFileBytes bounds one decoded write_files entry.
	MaxBootstrapFileBytes = 16 << 20
	// MaxBootstrapBytes bounds all decoded write_files entries together.
	MaxBootstrapBytes = 64 << 20
)

// filePath is the absolute, clean path of the file.
func (f cloudConfigFile) filePath() string {
	return path.Clean("/" + strings.TrimSpace(f.Path))
}

// mode is the file's mode, cloud-init's 0644 unless set.
func (f cloudConfigFile) mode() fs.FileMode {
	if f.Permissions.Set {
		return f.Permissions.Mode
	}
	return 0o644
}

// decode returns the file's content, decoded as its encoding says.
func (f cloudConfigFile) decode() ([]byte, error) {
	content := []byte(f.Content)
	var err error
	switch strings.ToLower(strings.TrimSpace(f.Encoding)) {
	case "", "text/plain":
		return content, nil
	case "b64", "base64":
		return decodeBase64(content, f.filePath())
	case "gz", "gzip":
		return gunzip(content, f.filePath())
	case "gz+b64", "gz+base64", "gzip+b64", "gzip+base64":
		if content, err = decodeBase64(content, f.filePath()); err != nil {
			return nil, err
		}
		return gunzip(content, f.filePath())
	default:
		return nil, fmt.Errorf("write_files entry %s has the unknown encoding %q", f.filePath(), f.Encoding)
	}
}

func decodeBase64(content []byte, filePath string) ([]byte, error) {
	// Line breaks and blanks are common in YAML block scalars.
	clean := bytes.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, content)
	out := make([]byte, base64.StdEncoding.DecodedLen(len(clean)))
	n, err := base64.StdEncoding.Decode(out, clean)
	if err != nil {
		return nil, fmt.Errorf("write_files entry %s is not valid base64: %w", filePath, err)
	}
	return out[:n], nil
}

func gunzip(content []byte, filePath string) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(content))
	if err != nil {
		return nil, fmt.Errorf("write_files entry %s is not valid gzip: %w", filePath, err)
	}
	// One byte more than allowed tells "too large" from "exactly the limit".
	out, err := io.ReadAll(io.LimitReader(r, MaxBootstrapFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("write_files entry %s is not valid gzip: %w", filePath, err)
	}
	if len(out) > MaxBootstrapFileBytes {
		return nil, fmt.Errorf("write_files entry %s decompresses to more than %d MiB", filePath, MaxBootstrapFileBytes>>20)
	}
	return out, nil
}
