// Package capimodule finds the pinned sigs.k8s.io/cluster-api module on disk:
// the CRDs and webhook manifests of Cluster API's managers (core, kubeadm
// bootstrap, kubeadm control plane) are read from it, and the version it
// names picks their cached binaries.
//
// A built capi-monolith binary knows the version it was linked with (its
// build information) and looks the module up in the Go module cache; inside
// the source tree `go list -m` is the fallback. Neither needs the network:
// the module is in the cache whenever the project was built on this machine.
package capimodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"unicode"
)

// Path is the module whose manifests the dev environment installs.
const Path = "sigs.k8s.io/cluster-api"

// Module is a Go module and where its files are.
type Module struct {
	Path    string
	Version string
	// Dir is the module's folder in the module cache.
	Dir string
}

// Component is the folder of one of Cluster API's managers in the module,
// which holds its main package and its config/ manifests.
type Component string

// The components whose managers dev runs.
const (
	Core                Component = "core"
	KubeadmBootstrap    Component = "bootstrap/kubeadm"
	KubeadmControlPlane Component = "controlplane/kubeadm"
)

// ComponentCRDDirectory is the folder of the component's CRDs.
func (m Module) ComponentCRDDirectory(c Component) string {
	return filepath.Join(m.Dir, filepath.FromSlash(string(c)), "config", "crd", "bases")
}

// ComponentWebhookManifests is the file of the component's admission
// webhook configurations.
func (m Module) ComponentWebhookManifests(c Component) string {
	return filepath.Join(m.Dir, filepath.FromSlash(string(c)), "config", "webhook", "manifests.yaml")
}

// CRDDirectory is the folder of Cluster API core's CRDs.
func (m Module) CRDDirectory() string { return m.ComponentCRDDirectory(Core) }

// WebhookManifests is the file of Cluster API core's admission webhook
// configurations.
func (m Module) WebhookManifests() string { return m.ComponentWebhookManifests(Core) }

// located runs once per process: the answer cannot change while it runs.
var located = sync.OnceValues(locate)

// Locate returns the sigs.k8s.io/cluster-api module this binary was built
// with, found on disk.
func Locate() (Module, error) {
	return located()
}

func locate() (Module, error) {
	var firstErr error
	if m, ok := fromBuildInfo(); ok {
		dir, err := moduleCacheDir(m.Path, m.Version)
		if err == nil {
			m.Dir = dir
			return m, nil
		}
		firstErr = err
	}
	m, err := goListModule(Path)
	if err != nil {
		if firstErr != nil {
			return Module{}, fmt.Errorf("%w (and %w)", firstErr, err)
		}
		return Module{}, err
	}
	return m, nil
}

func fromBuildInfo() (Module, bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Module{}, false
	}
	for _, dep := range info.Deps {
		if dep.Path != Path {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		if dep.Version == "" || dep.Version == "(devel)" {
			return Module{}, false
		}
		return Module{Path: dep.Path, Version: dep.Version}, true
	}
	return Module{}, false
}

// moduleCacheDir returns <GOMODCACHE>/<escaped path>@<version> when it exists.
func moduleCacheDir(path, version string) (string, error) {
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("failed to find the Go module cache (set GOMODCACHE): %w", err)
			}
			gopath = filepath.Join(home, "go")
		}
		cache = filepath.Join(filepath.SplitList(gopath)[0], "pkg", "mod")
	}
	dir := filepath.Join(cache, escape(path)+"@"+escape(version))
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("failed to find module %s@%s in the Go module cache %s: run `go mod download %s@%s`: %w", path, version, cache, path, version, err)
	}
	return dir, nil
}

// escape applies the module cache's case encoding: an upper-case letter
// becomes '!' and its lower-case form.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func goListModule(path string) (Module, error) {
	cmd := exec.Command("go", "list", "-m", "-json", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Module{}, fmt.Errorf("failed to locate module %s with `go list -m` (run from inside the capi-monolith module, or `go mod download %s`): %w: %s", path, path, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var m Module
	if err := json.Unmarshal(out, &m); err != nil {
		return Module{}, fmt.Errorf("failed to parse `go list -m %s` output: %w", path, err)
	}
	if m.Dir == "" {
		return Module{}, fmt.Errorf("failed to locate module %s: it is not in the module cache, run `go mod download %s`", path, path)
	}
	return m, nil
}
