package kubeadm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
)

// Bootstrap data formats, as CABPK's KubeadmConfig spec.format and its
// bootstrap Secret's "format" key name them.
const (
	FormatCloudConfig = "cloud-config"
	FormatIgnition    = "ignition"
)

const kubeadmGroup = "kubeadm.k8s.io"

// Bootstrap is what kubeadm bootstrap data says: the machine's role and the
// kubeadm configuration the machine's kubeadm would run with.
type Bootstrap struct {
	Role Role
	// NodeRegistration is the InitConfiguration's or JoinConfiguration's:
	// the node's name (may be a cloud-init template such as
	// '{{ ds.meta_data.local_hostname }}'), taints and kubelet arguments.
	NodeRegistration bootstrapv1.NodeRegistrationOptions
	// ClusterConfiguration is the init data's ClusterConfiguration (nil for
	// joins), for Cluster.ClusterConfiguration.
	ClusterConfiguration *bootstrapv1.ClusterConfiguration
	// KubernetesVersion, ClusterName, PodSubnet, ServiceSubnet and DNSDomain
	// are what the init data's ClusterConfiguration says of them ("" when it
	// says nothing, and for joins).
	KubernetesVersion, ClusterName, PodSubnet, ServiceSubnet, DNSDomain string
}

// NodeLabels are the labels the kubelet registers the node with from
// nodeRegistration.kubeletExtraArgs node-labels (k=v,k2=v2).
func (b *Bootstrap) NodeLabels() map[string]string {
	out := map[string]string{}
	for _, a := range b.NodeRegistration.KubeletExtraArgs {
		if a.Name != "node-labels" {
			continue
		}
		if a.Value == nil {
			continue
		}
		for kv := range strings.SplitSeq(*a.Value, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
			if k != "" {
				out[k] = v
			}
		}
	}
	return out
}

// Recognize tells kubeadm bootstrap data (cloud-config or Ignition, as CABPK
// writes it) apart from other data: Init, JoinControlPlane or JoinWorker, or
// an error wrapping ErrNotKubeadm.
func Recognize(data []byte, format string) (Role, error) {
	b, err := Parse(data, format)
	if err != nil {
		return "", err
	}
	return b.Role, nil
}

// Parse reads kubeadm bootstrap data: cloud-config (format "cloud-config")
// whose write_files hold kubeadm's configuration, or an Ignition config
// (format "ignition") whose storage files do; format "" guesses from the
// data. The role is Init when the configuration holds an
// InitConfiguration, JoinControlPlane for a JoinConfiguration with a
// controlPlane, JoinWorker for one without. Data without kubeadm
// configuration is an error wrapping ErrNotKubeadm; data that cannot be
// read as its format also wraps ErrMalformed, data past the decoding bound
// ErrTooLarge, and a broken encoding or a kubeadm configuration that does
// not parse is an error that does not wrap ErrNotKubeadm.
func Parse(data []byte, format string) (*Bootstrap, error) {
	if format == "" {
		format = FormatCloudConfig
		if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
			format = FormatIgnition
		}
	}
	d := &decoder{left: MaxBootstrapBytes}
	var b *Bootstrap
	var err error
	switch format {
	case FormatCloudConfig:
		b, err = d.cloudConfig(data)
	case FormatIgnition:
		b, err = d.ignition(data)
	default:
		return nil, fmt.Errorf("%w: unknown format %q", ErrNotKubeadm, format)
	}
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("%w: no kubeadm InitConfiguration or JoinConfiguration in the %s data", ErrNotKubeadm, format)
	}
	return b, nil
}

// Limits of decoded bootstrap data, the docker backend's too
// (backend/docker.MaxBootstrapFileBytes and MaxBootstrapBytes). A Secret
// holds at most 1 MiB, but gzip expands about a thousandfold: unbounded,
// one Secret could take gigabytes of the process every workload cluster
// shares. kubeadm's files are kilobytes.
const (
	// MaxBootstrapFileBytes bounds one decoded file.
	MaxBootstrapFileBytes = 16 << 20
	// MaxBootstrapBytes bounds all decoded files together.
	MaxBootstrapBytes = 64 << 20
)

// ErrTooLarge is returned (wrapped, with ErrNotKubeadm) for bootstrap data
// whose files decode to more than MaxBootstrapFileBytes each or
// MaxBootstrapBytes together; decoding stops at the bound.
var ErrTooLarge = errors.New("bootstrap data decodes to too many bytes")

// decoder decodes a bootstrap document's files one at a time into one
// reused buffer, within a budget of decoded bytes: memory stays bounded by
// MaxBootstrapFileBytes whatever the data, and only files that mention
// kubeadm's API group are parsed at all.
type decoder struct {
	left int
	buf  []byte
}

// file accounts a decoded file against the budget and, when it may be
// kubeadm's configuration, parses it.
func (d *decoder) file(content []byte, name string) (*Bootstrap, error) {
	if len(content) > MaxBootstrapFileBytes || len(content) > d.left {
		return nil, fmt.Errorf("%w: %w: file %s", ErrNotKubeadm, ErrTooLarge, name)
	}
	d.left -= len(content)
	if !bytes.Contains(content, []byte(kubeadmGroup)) {
		return nil, nil
	}
	b, found, err := parseKubeadmConfig(content)
	if err != nil || !found {
		return nil, err
	}
	return b, nil
}

// gunzip decompresses b into the decoder's buffer, stopping one byte past
// what the budget allows; the result is valid until the next call.
func (d *decoder) gunzip(b []byte, name string) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	limit := min(MaxBootstrapFileBytes, d.left)
	out, err := readBounded(r, d.buf[:0], limit)
	d.buf = out
	if err != nil {
		return nil, err
	}
	if len(out) == limit {
		// Full: one more byte tells "too large" from "exactly the bound".
		var probe [1]byte
		if n, _ := io.ReadFull(r, probe[:]); n > 0 {
			return nil, fmt.Errorf("%w: %w: file %s decompresses to more than %d bytes", ErrNotKubeadm, ErrTooLarge, name, limit)
		}
	}
	return out, nil
}

// readBounded appends r's bytes to buf until EOF or limit bytes. Its
// buffer doubles but never past limit, so that reading up to limit
// allocates about 2*limit in all (io.ReadAll's growth could allocate several times what it
// reads, and reads without an end).
func readBounded(r io.Reader, buf []byte, limit int) ([]byte, error) {
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(limit, max(2*cap(buf), 4096)))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// cloudConfig finds kubeadm's configuration in a cloud-config's write_files.
func (d *decoder) cloudConfig(data []byte) (*Bootstrap, error) {
	// CABPK's cloud-config starts with a jinja header line, then the
	// #cloud-config marker cloud-init requires.
	first := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "## template:") {
			continue
		}
		first = line
		break
	}
	if first != "#cloud-config" {
		return nil, fmt.Errorf("%w: not a cloud-config (no #cloud-config line)", ErrNotKubeadm)
	}
	var cc struct {
		WriteFiles []struct {
			Path     string `json:"path"`
			Encoding string `json:"encoding"`
			Content  string `json:"content"`
		} `json:"write_files"`
	}
	if err := yaml.Unmarshal(data, &cc); err != nil {
		return nil, fmt.Errorf("%w: %w: cloud-config is not YAML: %w", ErrNotKubeadm, ErrMalformed, err)
	}
	for _, f := range cc.WriteFiles {
		content, err := d.decodeCloudInitContent(f.Encoding, f.Content, f.Path)
		if err != nil {
			return nil, fmt.Errorf("failed to decode write_files %s: %w", f.Path, err)
		}
		if b, err := d.file(content, f.Path); b != nil || err != nil {
			return b, err
		}
	}
	return nil, nil
}

// decodeCloudInitContent undoes write_files' encodings, as cloud-init names them.
func (d *decoder) decodeCloudInitContent(encoding, content, name string) ([]byte, error) {
	switch strings.ToLower(encoding) {
	case "", "text/plain":
		return []byte(content), nil
	case "b64", "base64":
		return base64.StdEncoding.DecodeString(content)
	case "gz", "gzip":
		return d.gunzip([]byte(content), name)
	case "gz+base64", "gzip+base64", "gz+b64", "gzip+b64":
		raw, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return nil, err
		}
		return d.gunzip(raw, name)
	default:
		return nil, fmt.Errorf("unknown encoding %q", encoding)
	}
}

// ignition finds kubeadm's configuration in an Ignition config's storage
// files.
func (d *decoder) ignition(data []byte) (*Bootstrap, error) {
	var ign struct {
		Ignition struct {
			Version string `json:"version"`
		} `json:"ignition"`
		Storage struct {
			Files []struct {
				Path     string `json:"path"`
				Contents struct {
					Source      *string `json:"source"`
					Compression *string `json:"compression"`
				} `json:"contents"`
			} `json:"files"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(data, &ign); err != nil {
		return nil, fmt.Errorf("%w: %w: Ignition config is not JSON: %w", ErrNotKubeadm, ErrMalformed, err)
	}
	if ign.Ignition.Version == "" {
		return nil, fmt.Errorf("%w: not an Ignition config (no ignition.version)", ErrNotKubeadm)
	}
	for _, f := range ign.Storage.Files {
		if f.Contents.Source == nil {
			continue
		}
		content, err := decodeDataURL(*f.Contents.Source)
		if err != nil {
			// Remote sources (https://, s3://) cannot hold kubeadm's config as CABPK writes it.
			continue
		}
		if f.Contents.Compression != nil && *f.Contents.Compression == "gzip" {
			if content, err = d.gunzip(content, f.Path); err != nil {
				return nil, fmt.Errorf("failed to decompress Ignition file %s: %w", f.Path, err)
			}
		}
		if b, err := d.file(content, f.Path); b != nil || err != nil {
			return b, err
		}
	}
	return nil, nil
}

// decodeDataURL decodes an RFC 2397 data URL, as Ignition inlines files.
func decodeDataURL(source string) ([]byte, error) {
	rest, ok := strings.CutPrefix(source, "data:")
	if !ok {
		return nil, errors.New("not a data URL")
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, errors.New("data URL without a comma")
	}
	if strings.HasSuffix(meta, ";base64") {
		return base64.StdEncoding.DecodeString(payload)
	}
	s, err := url.PathUnescape(payload)
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// parseKubeadmConfig reads one file's YAML documents and, when one is a
// kubeadm InitConfiguration or JoinConfiguration, returns what they say.
func parseKubeadmConfig(file []byte) (*Bootstrap, bool, error) {
	docs, err := yamlDocuments(file)
	if err != nil {
		// Not YAML: not the kubeadm configuration file.
		return nil, false, nil
	}
	b := &Bootstrap{}
	found := false
	var clusterDoc string
	for _, doc := range docs {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			continue
		}
		group, _, _ := strings.Cut(tm.APIVersion, "/")
		if group != kubeadmGroup {
			continue
		}
		switch tm.Kind {
		case "InitConfiguration":
			ic, err := kubeadmtypes.UnmarshalInitConfiguration(string(doc))
			if err != nil {
				return nil, false, fmt.Errorf("failed to read kubeadm's InitConfiguration: %w", err)
			}
			b.Role, b.NodeRegistration, found = Init, ic.NodeRegistration, true
		case "JoinConfiguration":
			jc, err := kubeadmtypes.UnmarshalJoinConfiguration(string(doc))
			if err != nil {
				return nil, false, fmt.Errorf("failed to read kubeadm's JoinConfiguration: %w", err)
			}
			b.Role, b.NodeRegistration, found = JoinWorker, jc.NodeRegistration, true
			if jc.ControlPlane != nil {
				b.Role = JoinControlPlane
			}
		case "ClusterConfiguration":
			clusterDoc = string(doc)
		}
	}
	if !found {
		return nil, false, nil
	}
	if b.Role == Init && clusterDoc != "" {
		cc, extra, err := kubeadmtypes.UnmarshalClusterConfiguration(clusterDoc)
		if err != nil {
			return nil, false, fmt.Errorf("failed to read kubeadm's ClusterConfiguration: %w", err)
		}
		b.ClusterConfiguration = cc
		deref := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		b.KubernetesVersion = deref(extra.KubernetesVersion)
		b.ClusterName = deref(extra.ClusterName)
		b.PodSubnet = deref(extra.PodSubnet)
		b.ServiceSubnet = deref(extra.ServiceSubnet)
		b.DNSDomain = deref(extra.DNSDomain)
	}
	return b, true, nil
}

func yamlDocuments(file []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(file)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}
