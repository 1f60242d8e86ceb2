package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// The peer is Cluster API's in-memory provider as v1.14.2 ships it: the
// DevCluster and DevMachine kinds of the test module's infrastructure
// provider (sigs.k8s.io/cluster-api/test/infrastructure/docker, whose
// inMemory backend replaced the standalone in-memory provider), built from
// the version test/capie2e pins.
const (
	peerModule  = "sigs.k8s.io/cluster-api/test"
	peerVersion = "v1.14.2"
	peerPackage = peerModule + "/infrastructure/docker"
	// peerBinaryName is the built provider's file name.
	peerBinaryName = "capi-inmemory"
)

// PartPeer is the peer provider's process in the figures.
const PartPeer Part = "capi in-memory provider"

// buildPeer builds the peer in scratch/mod: a module made of test/capie2e's
// go.mod and go.sum (which pin the test module and Cluster API with its
// replace directives), completed by `go get` for the packages only the
// provider's main imports. It returns the binary and the module's folder in
// the module cache, where its CRDs are.
func buildPeer(ctx context.Context, repoRoot, scratch string) (bin, moduleDir string, err error) {
	dir := filepath.Join(scratch, "mod")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("failed to create %s: %w", dir, err)
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, "test", "capie2e", f))
		if err != nil {
			return "", "", fmt.Errorf("failed to read test/capie2e's %s: %w", f, err)
		}
		if f == "go.mod" {
			data = renameModule(data, "capi-monolith-bench/inmemory-peer")
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			return "", "", fmt.Errorf("failed to write %s: %w", f, err)
		}
	}
	bin = filepath.Join(scratch, peerBinaryName)
	for _, args := range [][]string{
		{"get", peerPackage + "@" + peerVersion},
		{"build", "-o", bin, peerPackage},
	} {
		if out, err := goCommand(ctx, dir, args...).CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("failed to run go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, out)
		}
	}
	out, err := goCommand(ctx, dir, "list", "-m", "-f", "{{.Dir}}", peerModule).Output()
	if err != nil {
		return "", "", fmt.Errorf("failed to find %s in the module cache: %w", peerModule, err)
	}
	return bin, strings.TrimSpace(string(out)), nil
}

func goCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS=-mod=mod")
	return cmd
}

// renameModule replaces the module line of a go.mod.
func renameModule(gomod []byte, name string) []byte {
	lines := bytes.Split(gomod, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("module ")) {
			lines[i] = []byte("module " + name)
			break
		}
	}
	return bytes.Join(lines, []byte("\n"))
}

// peerContractLabels are the labels the provider's kustomization puts on its
// CRDs: Cluster API core resolves an infrastructure reference's version by
// the contract label of the CRD.
var peerContractLabels = map[string]string{
	"cluster.x-k8s.io/v1beta1": "v1beta1",
	"cluster.x-k8s.io/v1beta2": "v1beta2",
}

// readPeerCRDs reads the CRDs of the provider's config/crd/bases (its
// Docker* controllers, which this benchmark does not use, still need
// theirs to start) and labels them as its kustomization does. Their conversion webhook patch is left out: every object here is
// v1beta2, the storage version.
func readPeerCRDs(moduleDir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dir := filepath.Join(moduleDir, "infrastructure", "docker", "config", "crd", "bases")
	files, err := filepath.Glob(filepath.Join(dir, "infrastructure.cluster.x-k8s.io_*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("failed to find the peer's CRDs in %s (%v)", dir, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", f, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return nil, fmt.Errorf("failed to parse %s: %w", f, err)
		}
		out = append(out, withContractLabels(crd))
	}
	return out, nil
}

// withContractLabels adds peerContractLabels to crd's labels.
func withContractLabels(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	labels := crd.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range peerContractLabels {
		labels[k] = v
	}
	crd.SetLabels(labels)
	return crd
}

// installPeerCRDs installs the peer's CRDs into dev's apiserver.
func installPeerCRDs(cfg *rest.Config, moduleDir string) error {
	crds, err := readPeerCRDs(moduleDir)
	if err != nil {
		return err
	}
	if _, err := crenvtest.InstallCRDs(cfg, crenvtest.CRDInstallOptions{CRDs: crds}); err != nil {
		return fmt.Errorf("failed to install the peer's CRDs: %w", err)
	}
	return nil
}

// startPeer runs the peer against dev's admin kubeconfig (no RBAC needed),
// its webhook server on a certificate made here (the apiserver is not told
// to call it: its webhooks validate and default fields the objects here
// set), its workload clusters' API servers on 127.0.0.1 (POD_IP, as its
// deployment sets from the pod's IP), and waits for its /readyz. With a
// diagnostics token, it serves its secure diagnostics endpoint (metrics and
// pprof, as Cluster API's managers do by default) on a loopback port read
// with that token; without, none.
func startPeer(ctx context.Context, bin, kubeconfig, dir, diagnosticsToken string) (*process.Process, error) {
	return process.Start(ctx, process.Options{
		Name: "the peer", Binary: bin, Kubeconfig: kubeconfig, Dir: dir,
		DiagnosticsToken: diagnosticsToken, NoDiagnostics: diagnosticsToken == "",
		Args: []string{"--leader-elect=false", "--v=0", "--insecure-diagnostics=false"},
		Env:  []string{"POD_IP=127.0.0.1", "KUBECONFIG=" + kubeconfig},
	})
}
