// Package controlplane starts the dev environment's Kubernetes API: etcd and
// kube-apiserver from the binaries the project builds and caches (the
// envtest assets), or an existing cluster named by a kubeconfig.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubernetesVersion is the version of kube-apiserver and etcd that
// `make envtest-assets` builds; it must match KUBE_VERSION in the Makefile.
const KubernetesVersion = "v1.36.3"

// Options configures Start.
type Options struct {
	// Kubeconfig, when set, names an existing cluster to use instead of
	// starting etcd and kube-apiserver. Its current context is used.
	Kubeconfig string

	// AssetsDir holds kube-apiserver and etcd. Default: $KUBEBUILDER_ASSETS,
	// else <cache>/envtest/<KubernetesVersion> (see AssetsDirectory).
	AssetsDir string

	// CacheDir is the project's tool cache. Required when AssetsDir and
	// $KUBEBUILDER_ASSETS are empty.
	CacheDir string

	// DataDir keeps etcd's data, so that the next Start on the same folder
	// resumes where this one stopped. Default: a temporary folder removed by
	// Stop.
	DataDir string

	// Output receives etcd's and kube-apiserver's output. Default: discarded.
	Output io.Writer
}

// ControlPlane is a running Kubernetes API.
type ControlPlane struct {
	// Config is the admin (system:masters) config of the apiserver.
	Config *rest.Config
	// External is true when the API is an existing cluster Start only
	// connected to.
	External bool

	env *crenvtest.Environment
}

// Start starts etcd and kube-apiserver (or connects to opts.Kubeconfig) and
// returns once the apiserver answers.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("failed to start the control plane: %w", err)
	}
	if opts.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("failed to load the kubeconfig %s: %w", opts.Kubeconfig, err)
		}
		return &ControlPlane{Config: cfg, External: true}, nil
	}

	assets, err := AssetsDirectory(opts.AssetsDir, opts.CacheDir)
	if err != nil {
		return nil, err
	}
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	env := &crenvtest.Environment{BinaryAssetsDirectory: assets}
	// Set the binaries explicitly so that no TEST_ASSET_* variable or
	// setup-envtest folder can swap in another version behind our back.
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.Path = filepath.Join(assets, "kube-apiserver")
	apiServer.Out, apiServer.Err = out, out
	etcd := &crenvtest.Etcd{Path: filepath.Join(assets, "etcd"), Out: out, Err: out}
	if opts.DataDir != "" {
		dir := filepath.Join(opts.DataDir, "etcd")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("failed to create etcd's data folder: %w", err)
		}
		etcd.DataDir = dir
		// envtest turns fsync off for speed; data meant to survive a
		// restart (or a crash) needs it on.
		etcd.Configure().Set("unsafe-no-fsync", "false")
	}
	env.ControlPlane.Etcd = etcd
	cfg, err := env.Start()
	if err != nil {
		// Start may fail after etcd or the apiserver started: stop what runs.
		return nil, errors.Join(fmt.Errorf("failed to start etcd and kube-apiserver from %s: %w", assets, err), env.Stop())
	}
	return &ControlPlane{Config: cfg, env: env}, nil
}

// Stop stops kube-apiserver and etcd. etcd's data is removed unless
// Options.DataDir was given. An existing cluster is left alone.
func (c *ControlPlane) Stop() error {
	if c.env == nil {
		return nil
	}
	if err := c.env.Stop(); err != nil {
		return fmt.Errorf("failed to stop etcd and kube-apiserver: %w", err)
	}
	return nil
}

// AssetsDirectory returns the folder holding kube-apiserver and etcd: given,
// else $KUBEBUILDER_ASSETS, else <cacheDir>/envtest/<KubernetesVersion>. It
// fails, naming `make envtest-assets`, when the binaries are not there.
func AssetsDirectory(given, cacheDir string) (string, error) {
	dir, source := given, "Options.AssetsDir"
	if dir == "" {
		dir, source = os.Getenv("KUBEBUILDER_ASSETS"), "KUBEBUILDER_ASSETS"
	}
	if dir == "" {
		if cacheDir == "" {
			return "", fmt.Errorf("failed to find kube-apiserver and etcd: set KUBEBUILDER_ASSETS or the cache folder")
		}
		dir, source = filepath.Join(cacheDir, "envtest", KubernetesVersion), "the default cache folder"
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("failed to find %s in %s (%s): run `make envtest-assets` or set KUBEBUILDER_ASSETS: %w", name, dir, source, err)
		}
	}
	return dir, nil
}
