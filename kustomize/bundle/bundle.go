package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// ImageVariable is the clusterctl variable naming the manager's image in
// every components file; its default is Options.Image.
const ImageVariable = "MONOLITH_IMAGE"

// DefaultImageRepository is the image repository of released managers; the
// tag is the bundle's version.
const DefaultImageRepository = "ghcr.io/capi-monolith/capi-monolith"

// Options says what to build. Version is required.
type Options struct {
	// Version is the release, a semantic version with a leading v
	// (vX.Y.Z): the repository's version folder and the metadata's
	// release series.
	Version string
	// Image is the default of ${MONOLITH_IMAGE}, written in its canonical
	// form (capi-monolith:dev becomes docker.io/library/capi-monolith:dev):
	// clusterctl refuses components whose image is not canonical. Default:
	// DefaultImageRepository:<Version>.
	Image string
}

func (o Options) image() string {
	if o.Image == "" {
		return DefaultImageRepository + ":" + o.Version
	}
	named, err := reference.ParseNormalizedNamed(o.Image)
	if err != nil {
		// Validate reported it before.
		return o.Image
	}
	return named.String()
}

// Validate reports a version clusterctl would not accept as a version
// folder, and an image that would break the variable it is the default of.
func (o Options) Validate() error {
	if _, err := parseVersion(o.Version); err != nil {
		return err
	}
	if strings.ContainsAny(o.Image, "${} \t\n") {
		return fmt.Errorf("invalid image %q: it must not contain spaces, '$', '{' or '}'", o.Image)
	}
	if o.Image != "" {
		if _, err := reference.ParseNormalizedNamed(o.Image); err != nil {
			return fmt.Errorf("invalid image %q: %w", o.Image, err)
		}
	}
	return nil
}

func parseVersion(v string) (*version.Version, error) {
	if !strings.HasPrefix(v, "v") {
		return nil, fmt.Errorf("invalid version %q: it must be a semantic version with a leading v, e.g. v0.1.0", v)
	}
	parsed, err := version.ParseSemantic(v)
	if err != nil {
		return nil, fmt.Errorf("invalid version %q: it must be a semantic version with a leading v, e.g. v0.1.0: %w", v, err)
	}
	return parsed, nil
}

// Repository is a built clusterctl local repository: file contents by
// slash-separated path relative to the repository's root folder. The
// clusterctl.yaml is not in it: it names the folder the repository is
// written to (see ClusterctlConfig).
type Repository map[string][]byte

// Build builds every bundle in memory.
func Build(opts Options) (Repository, error) {
	return embedded.build(opts)
}

func (s sources) build(opts Options) (Repository, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	v, _ := parseVersion(opts.Version)
	mem, err := s.tree(opts)
	if err != nil {
		return nil, err
	}
	repo := Repository{}
	metadata := metadataYAML(v)
	for _, p := range Providers {
		dir := path.Join(p.Label, opts.Version)
		out, err := kustomizeBuild(mem, p.Overlay)
		if err != nil {
			return nil, err
		}
		repo[path.Join(dir, p.ComponentsFile)] = out
		if p.Docker != nil {
			out, err := kustomizeBuild(mem, p.Docker.Overlay)
			if err != nil {
				return nil, err
			}
			repo[path.Join(dir, p.Docker.ComponentsFile)] = out
		}
		repo[path.Join(dir, "metadata.yaml")] = metadata
		if !p.Templates {
			continue
		}
		templates, err := yamlFiles(s.kustomize, "templates")
		if err != nil {
			return nil, err
		}
		for _, t := range templates {
			b, err := fs.ReadFile(s.kustomize, path.Join("templates", t))
			if err != nil {
				return nil, fmt.Errorf("failed to read template %s: %w", t, err)
			}
			repo[path.Join(dir, t)] = b
		}
	}
	out, err := kustomizeBuild(mem, AllInOne.Overlay)
	if err != nil {
		return nil, err
	}
	repo[AllInOneFile] = out
	out, err = kustomizeBuild(mem, AllInOne.Docker.Overlay)
	if err != nil {
		return nil, err
	}
	repo[AllInOne.Docker.ComponentsFile] = out
	return repo, nil
}

func kustomizeBuild(mem filesys.FileSystem, overlay string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	// Namespace and CRDs first, as the kustomize CLI orders them.
	opts.Reorder = krusty.ReorderOptionLegacy
	resources, err := krusty.MakeKustomizer(opts).Run(mem, path.Join(bundlesDir, overlay))
	if err != nil {
		return nil, fmt.Errorf("failed to build overlay %s: %w", overlay, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("failed to write overlay %s as YAML: %w", overlay, err)
	}
	return out, nil
}

// Series is a release series: a major.minor of capi-monolith.
type Series struct{ Major, Minor uint }

// ReleasedSeries are the release series published so far, oldest first.
// clusterctl upgrade reads the newest release's metadata.yaml and needs the
// installed version's series in it: a released minor stays here for good
// (add one when it is released).
var ReleasedSeries = []Series{{Major: 0, Minor: 1}}

// metadataYAML maps every released series up to the version's, and the
// version's own, to the contract.
func metadataYAML(v *version.Version) []byte {
	own := Series{Major: v.Major(), Minor: v.Minor()}
	var b strings.Builder
	b.WriteString(`# Maps capi-monolith's release series to the Cluster API contract they implement.
apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
`)
	for _, s := range seriesUpTo(own) {
		fmt.Fprintf(&b, "- major: %d\n  minor: %d\n  contract: %s\n", s.Major, s.Minor, Contract)
	}
	return []byte(b.String())
}

// seriesUpTo returns the released series older than own, then own.
func seriesUpTo(own Series) []Series {
	var out []Series
	for _, s := range ReleasedSeries {
		if s.Major < own.Major || (s.Major == own.Major && s.Minor < own.Minor) {
			out = append(out, s)
		}
	}
	return append(out, own)
}

// ClusterctlConfig is a clusterctl configuration file listing the three
// providers of the repository written to dir (an absolute path) at version.
func ClusterctlConfig(dir, version string) []byte {
	return clusterctlConfig(dir, version, ClusterctlConfigFile, "", false)
}

// ClusterctlDockerConfig is ClusterctlConfig with each provider's Docker
// variant (the infrastructure components mounting the node's Docker
// socket) in place of its default components.
func ClusterctlDockerConfig(dir, version string) []byte {
	return clusterctlConfig(dir, version, ClusterctlDockerConfigFile,
		"# The infrastructure provider mounts the node's Docker socket (docker backend).\n", true)
}

func clusterctlConfig(dir, version, name, note string, docker bool) []byte {
	var b strings.Builder
	b.WriteString("# clusterctl configuration for the capi-monolith providers of this folder:\n")
	fmt.Fprintf(&b, "#   clusterctl init --config %s --infrastructure monolith --ipam monolith --runtime-extension monolith\n", name)
	b.WriteString(note)
	b.WriteString("providers:\n")
	for _, p := range Providers {
		file := p.ComponentsFile
		if docker && p.Docker != nil {
			file = p.Docker.ComponentsFile
		}
		u := "file://" + filepath.ToSlash(filepath.Join(dir, p.Label, version, file))
		fmt.Fprintf(&b, "- name: %s\n  type: %s\n  url: %s\n", ProviderName, p.Type, u)
	}
	return []byte(b.String())
}

// ClusterctlConfigFile is the name of the clusterctl configuration file Write
// puts in the output folder.
const ClusterctlConfigFile = "clusterctl.yaml"

// ClusterctlDockerConfigFile is the name of the clusterctl configuration
// file, beside ClusterctlConfigFile, that installs the Docker variants.
const ClusterctlDockerConfigFile = "clusterctl-docker.yaml"

// Write builds every bundle and writes the repository to dir (created when
// missing), with a clusterctl.yaml pointing at it. The version's folders
// are replaced whole, so no file of an earlier build of the same version
// lingers; other versions' folders are kept.
func Write(dir string, opts Options) error {
	if dir == "" {
		return errors.New("no output folder given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("failed to resolve output folder %s: %w", dir, err)
	}
	repo, err := Build(opts)
	if err != nil {
		return err
	}
	repo[ClusterctlConfigFile] = ClusterctlConfig(abs, opts.Version)
	repo[ClusterctlDockerConfigFile] = ClusterctlDockerConfig(abs, opts.Version)
	for _, p := range Providers {
		if err := os.RemoveAll(filepath.Join(abs, p.Label, opts.Version)); err != nil {
			return fmt.Errorf("failed to clear %s: %w", filepath.Join(abs, p.Label, opts.Version), err)
		}
	}
	names := make([]string, 0, len(repo))
	for name := range repo {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := filepath.Join(abs, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("failed to create %s: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, repo[name], 0o644); err != nil {
			return fmt.Errorf("failed to write %s: %w", p, err)
		}
	}
	return nil
}
