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
// configuration is an error wrapping ErrNotKubeadm.
func Parse(data []byte, format string) (*Bootstrap, error) {
	if format == "" {
		format = FormatCloudConfig
		if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
			format = FormatIgnition
		}
	}
	var files [][]byte
	var err error
	switch format {
	case FormatCloudConfig:
		files, err = cloudConfigFiles(data)
	case FormatIgnition:
		files, err = ignitionFiles(data)
	default:
		return nil, fmt.Errorf("%w: unknown format %q", ErrNotKubeadm, format)
	}
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, found, err := parseKubeadmConfig(f)
		if err != nil {
			return nil, err
		}
		if found {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%w: no kubeadm InitConfiguration or JoinConfiguration in the %s data", ErrNotKubeadm, format)
}

// cloudConfigFiles are the contents of a cloud-config's write_files.
func cloudConfigFiles(data []byte) ([][]byte, error) {
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
		return nil, fmt.Errorf("%w: cloud-config is not YAML: %w", ErrNotKubeadm, err)
	}
	var out [][]byte
	for _, f := range cc.WriteFiles {
		content, err := decodeCloudInitContent(f.Encoding, f.Content)
		if err != nil {
			return nil, fmt.Errorf("failed to decode write_files %s: %w", f.Path, err)
		}
		out = append(out, content)
	}
	return out, nil
}

// decodeCloudInitContent undoes write_files' encodings, as cloud-init names them.
func decodeCloudInitContent(encoding, content string) ([]byte, error) {
	switch strings.ToLower(encoding) {
	case "", "text/plain":
		return []byte(content), nil
	case "b64", "base64":
		return base64.StdEncoding.DecodeString(content)
	case "gz", "gzip":
		return gunzip([]byte(content))
	case "gz+base64", "gzip+base64", "gz+b64", "gzip+b64":
		raw, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return nil, err
		}
		return gunzip(raw)
	default:
		return nil, fmt.Errorf("unknown encoding %q", encoding)
	}
}

// ignitionFiles are the contents of an Ignition config's storage files.
func ignitionFiles(data []byte) ([][]byte, error) {
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
		return nil, fmt.Errorf("%w: Ignition config is not JSON: %w", ErrNotKubeadm, err)
	}
	if ign.Ignition.Version == "" {
		return nil, fmt.Errorf("%w: not an Ignition config (no ignition.version)", ErrNotKubeadm)
	}
	var out [][]byte
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
			if content, err = gunzip(content); err != nil {
				return nil, fmt.Errorf("failed to decompress Ignition file %s: %w", f.Path, err)
			}
		}
		out = append(out, content)
	}
	return out, nil
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

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
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
