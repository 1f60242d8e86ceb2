package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// The in-cluster IPAM provider's pool kind, handled as unstructured so that
// none of its code is linked into ours.
var peerPoolGVK = schema.GroupVersionKind{Group: "ipam.cluster.x-k8s.io", Version: "v1alpha2", Kind: "InClusterIPPool"}

// peerBinaryName is the built provider's file name; it is also its command
// name in /proc (at most 15 characters), by which its CPU time is read.
const peerBinaryName = "ipam-in-cluster"

// peerSource is where the peer's source comes from: a git directory (bare
// or a work tree, whose HEAD is taken) or a plain folder (copied as is).
type peerSource struct {
	Path string
	// GitDir is the --git-dir to read HEAD from; empty for a plain folder.
	GitDir string
}

// resolvePeerSource tells a git directory from a plain folder.
func resolvePeerSource(ctx context.Context, path string) (peerSource, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return peerSource{}, fmt.Errorf("failed to resolve the peer source %s: %w", path, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return peerSource{}, fmt.Errorf("the peer source %s is not a folder", abs)
	}
	for _, dir := range []string{abs, filepath.Join(abs, ".git")} {
		if out, err := exec.CommandContext(ctx, "git", "--git-dir="+dir, "rev-parse", "--verify", "-q", "HEAD").Output(); err == nil && len(out) > 0 {
			return peerSource{Path: abs, GitDir: dir}, nil
		}
	}
	if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
		return peerSource{}, fmt.Errorf("the peer source %s is neither a git directory nor a folder with a go.mod", abs)
	}
	return peerSource{Path: abs}, nil
}

// Commit returns the source's HEAD, or "not a git directory".
func (s peerSource) Commit(ctx context.Context) string {
	if s.GitDir == "" {
		return "not a git directory"
	}
	out, err := exec.CommandContext(ctx, "git", "--git-dir="+s.GitDir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// Extract writes the source into dir: `git archive HEAD` for a git
// directory, a copy for a plain folder.
func (s peerSource) Extract(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("failed to create %s: %w", dir, err)
	}
	if s.GitDir == "" {
		if out, err := exec.CommandContext(ctx, "cp", "-a", s.Path+"/.", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("failed to copy the peer source: %w\n%s", err, out)
		}
		return nil
	}
	tarball := dir + ".tar"
	defer os.Remove(tarball)
	if out, err := exec.CommandContext(ctx, "git", "--git-dir="+s.GitDir, "archive", "--format=tar", "-o", tarball, "HEAD").CombinedOutput(); err != nil {
		return fmt.Errorf("failed to archive the peer source: %w\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "tar", "-xf", tarball, "-C", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("failed to extract the peer source: %w\n%s", err, out)
	}
	return nil
}

// buildPeer extracts the source into scratch/src and builds the provider's
// manager there with the local toolchain; its dependencies come from the
// module proxy. It returns the binary's path.
func buildPeer(ctx context.Context, src peerSource, scratch string) (string, error) {
	dir := filepath.Join(scratch, "src")
	if err := src.Extract(ctx, dir); err != nil {
		return "", err
	}
	bin := filepath.Join(scratch, peerBinaryName)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build the peer in %s: %w\n%s", dir, err, out)
	}
	return bin, nil
}

// installPeerCRDs installs the peer's own CRDs (config/crd/bases of its
// source); Cluster API's IPAddress and IPAddressClaim are already there.
func installPeerCRDs(cfg *rest.Config, scratch string) error {
	_, err := crenvtest.InstallCRDs(cfg, crenvtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(scratch, "src", "config", "crd", "bases")},
		ErrorIfPathMissing: true,
	})
	if err != nil {
		return fmt.Errorf("failed to install the peer's CRDs: %w", err)
	}
	return nil
}

// peerArgs are the peer's flags besides the ports and files startPeer adds:
// its defaults otherwise, as its own deployment runs it (no leader
// election in a one-replica benchmark, as for ours).
func peerArgs(namespace string) []string {
	return []string{"--namespace=" + namespace, "--leader-elect=false"}
}

// startPeer runs the peer's manager against cfg, with its webhook server
// serving a certificate made here (the apiserver is not told to call it,
// as for ours), and waits for its /readyz. With a token its diagnostics
// endpoint (Cluster API's --diagnostics-address, secured as ours) serves
// its metrics; without, it is off.
func startPeer(ctx context.Context, bin string, cfg *rest.Config, dir string, args []string, token string) (*process.Process, error) {
	return process.Start(ctx, process.Options{
		Name: "the peer", Binary: bin, Config: cfg, Dir: dir, Args: args,
		HealthFlag: "--health-probe-bind-address", NoDiagnostics: token == "", DiagnosticsToken: token,
	})
}

// newPeerPool is the peer's pool of the same /16 as ours.
func newPeerPool(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(peerPoolGVK)
	u.SetNamespace(ns)
	u.SetName(poolName)
	_ = unstructured.SetNestedStringSlice(u.Object, []string{poolCIDR}, "spec", "addresses")
	_ = unstructured.SetNestedField(u.Object, int64(poolPrefix), "spec", "prefix")
	return u
}
