package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/kio"

	"github.com/capi-monolith/capi-monolith/kustomize"
	"github.com/capi-monolith/capi-monolith/manifests"
)

// Folders of the in-memory tree krusty builds from. The overlays reach
// modulesDir as ../../modules, and the module kustomizations reach
// manifestsDir as ../../../manifests.
const (
	kustomizeDir = "/kustomize"
	manifestsDir = "/manifests"
	modulesDir   = kustomizeDir + "/modules"
	bundlesDir   = "/bundles"
)

// manifestKinds are the folders controller-gen writes per module.
var manifestKinds = []string{"crd", "rbac", "webhook"}

// sources are the embedded files the tree is made of; tests swap them.
type sources struct {
	kustomize fs.FS
	manifests fs.FS
}

var embedded = sources{kustomize: kustomize.FS, manifests: manifests.FS}

// tree returns the in-memory file system krusty runs on:
//
//	/kustomize/{base,overlays,components,templates}  (package kustomize)
//	/manifests/<module>/<kind>/*.yaml              (package manifests)
//	/manifests/<module>/<kind>/kustomization.yaml  (written here)
//	/kustomize/modules/<module>/kustomization.yaml (written here)
//	/bundles/<overlay>/kustomization.yaml          (written here)
//
// Every module of every overlay gets a module kustomization, an empty one
// when it has no manifests yet, so that a module's manifests join its
// bundles as soon as `make generate` writes them.
func (s sources) tree(opts Options) (filesys.FileSystem, error) {
	mem := filesys.MakeFsInMemory()
	if err := copyFS(mem, s.kustomize, kustomizeDir); err != nil {
		return nil, err
	}
	if err := copyFS(mem, s.manifests, manifestsDir); err != nil {
		return nil, err
	}
	for _, m := range moduleNames() {
		if err := writeModule(mem, s.manifests, m); err != nil {
			return nil, fmt.Errorf("failed to write the kustomization of module %s: %w", m, err)
		}
	}
	for _, p := range append(slices.Clone(Providers), AllInOne) {
		overlays := []string{p.Overlay}
		if p.Docker != nil {
			overlays = append(overlays, p.Docker.Overlay)
		}
		for _, o := range overlays {
			if err := writeFile(mem, path.Join(bundlesDir, o, "kustomization.yaml"), rootKustomization(o, opts)); err != nil {
				return nil, err
			}
		}
	}
	return mem, nil
}

// moduleNames are the modules every overlay names, sorted.
func moduleNames() []string {
	var names []string
	for _, p := range append(slices.Clone(Providers), AllInOne) {
		names = append(names, p.Modules...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// writeModule writes the kustomization of manifests/<m>/<kind> for every
// kind folder, and the module's kustomization gathering them with a binding
// of each of its roles to the manager's ServiceAccount.
func writeModule(mem filesys.FileSystem, src fs.FS, m string) error {
	var resources []string
	for _, kind := range manifestKinds {
		dir := path.Join(m, kind)
		files, err := yamlFiles(src, dir)
		if err != nil {
			return err
		}
		if len(files) == 0 {
			continue
		}
		var k strings.Builder
		k.WriteString(kustomizationHeader)
		if kind == "webhook" {
			// controller-gen names every module's webhook configurations
			// alike; the module name keeps them apart where modules meet.
			fmt.Fprintf(&k, "namePrefix: %s-\n", m)
		}
		k.WriteString("resources:\n")
		for _, f := range files {
			fmt.Fprintf(&k, "- %s\n", f)
		}
		if err := writeFile(mem, path.Join(manifestsDir, dir, "kustomization.yaml"), k.String()); err != nil {
			return err
		}
		resources = append(resources, "../../../manifests/"+dir)
		if kind == "rbac" {
			bindings, err := roleBindings(src, dir, files)
			if err != nil {
				return err
			}
			if bindings != "" {
				if err := writeFile(mem, path.Join(modulesDir, m, "role_bindings.yaml"), bindings); err != nil {
					return err
				}
				resources = append(resources, "role_bindings.yaml")
			}
		}
	}
	var k strings.Builder
	fmt.Fprintf(&k, "# Module %s: written by the bundle generator from manifests/%s.\n", m, m)
	k.WriteString(kustomizationHeader)
	if len(resources) == 0 {
		k.WriteString("resources: []\n")
	} else {
		k.WriteString("resources:\n")
		for _, r := range resources {
			fmt.Fprintf(&k, "- %s\n", r)
		}
	}
	return writeFile(mem, path.Join(modulesDir, m, "kustomization.yaml"), k.String())
}

const kustomizationHeader = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"

// roleBindings binds every ClusterRole and Role of the module's RBAC files
// to the manager's ServiceAccount; kustomize then prefixes both ends alike.
func roleBindings(src fs.FS, dir string, files []string) (string, error) {
	var out strings.Builder
	for _, f := range files {
		b, err := fs.ReadFile(src, path.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("failed to read %s: %w", path.Join(dir, f), err)
		}
		nodes, err := kio.FromBytes(b)
		if err != nil {
			return "", fmt.Errorf("failed to parse %s: %w", path.Join(dir, f), err)
		}
		for _, n := range nodes {
			switch n.GetKind() {
			case "ClusterRole":
				fmt.Fprintf(&out, binding, "ClusterRoleBinding", n.GetName(), "", "ClusterRole", n.GetName())
			case "Role":
				fmt.Fprintf(&out, binding, "RoleBinding", n.GetName(), "  namespace: system\n", "Role", n.GetName())
			}
		}
	}
	return out.String(), nil
}

const binding = `---
apiVersion: rbac.authorization.k8s.io/v1
kind: %s
metadata:
  name: %s
%sroleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: %s
  name: %s
subjects:
- kind: ServiceAccount
  name: manager
  namespace: system
`

// rootKustomization is the top of one bundle: the overlay, then what needs
// its final names (components/webhook-wiring), then the image.
func rootKustomization(overlay string, opts Options) string {
	return fmt.Sprintf(`%sresources:
- ../../kustomize/overlays/%s
components:
- ../../kustomize/components/webhook-wiring
patches:
- target:
    kind: Deployment
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/image
      value: ${%s:=%s}
`, kustomizationHeader, overlay, ImageVariable, opts.image())
}

// yamlFiles lists the .yaml files of dir in src, sorted; none when dir
// does not exist.
func yamlFiles(src fs.FS, dir string) ([]string, error) {
	entries, err := fs.ReadDir(src, dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to list %s: %w", dir, err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") && e.Name() != "kustomization.yaml" {
			files = append(files, e.Name())
		}
	}
	slices.Sort(files)
	return files, nil
}

// copyFS copies every file of src under dir of mem.
func copyFS(mem filesys.FileSystem, src fs.FS, dir string) error {
	return fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("failed to read the embedded files: %w", err)
		}
		if d.IsDir() || strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := fs.ReadFile(src, p)
		if err != nil {
			return fmt.Errorf("failed to read embedded %s: %w", p, err)
		}
		return writeFile(mem, path.Join(dir, p), string(b))
	})
}

func writeFile(mem filesys.FileSystem, name, content string) error {
	if err := mem.MkdirAll(path.Dir(name)); err != nil {
		return fmt.Errorf("failed to create %s: %w", path.Dir(name), err)
	}
	if err := mem.WriteFile(name, []byte(content)); err != nil {
		return fmt.Errorf("failed to write %s: %w", name, err)
	}
	return nil
}
