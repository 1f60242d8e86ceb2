package bundle_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client"

	"github.com/capi-monolith/capi-monolith/kustomize/bundle"
	"github.com/capi-monolith/capi-monolith/test/envtest"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

const (
	// testVersion is the version every test builds.
	testVersion = "v0.1.0"
	// certManagerCRDs stand in for cert-manager, so that clusterctl skips it.
	certManagerCRDs = "testdata/cert-manager-crds.yaml"
	// timeout bounds every wait on the apiserver.
	timeout = 30 * time.Second
)

var (
	// env runs Cluster API's, kubeadm's and cert-manager's CRDs plus the
	// CRDs and webhook configurations of the three provider bundles as
	// clusterctl renders them: the bundles, not manifests/, set it up.
	env *envtest.Environment
	// repoDir holds the repository `capi-monolith bundle` wrote for testVersion.
	repoDir string
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (code int, reterr error) {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "bundle-test-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(tmp)
	repoDir = filepath.Join(tmp, "repository")
	if err := bundle.Command(ctx, []string{"--version", testVersion, "--out", repoDir}); err != nil {
		return 1, err
	}

	// The provider bundles' own CRDs and webhook configurations, rendered by
	// clusterctl, set up the apiserver.
	rendered := filepath.Join(tmp, "rendered")
	if err := os.MkdirAll(rendered, 0o755); err != nil {
		return 1, err
	}
	c, err := clusterctlClient(ctx)
	if err != nil {
		return 1, err
	}
	for _, p := range bundle.Providers {
		comps, err := c.GetProviderComponents(ctx, bundle.ProviderName, clusterctlv1.ProviderType(p.Type), client.ComponentsOptions{Version: testVersion})
		if err != nil {
			return 1, fmt.Errorf("clusterctl failed to read the %s components: %w", p.Label, err)
		}
		y, err := comps.Yaml()
		if err != nil {
			return 1, err
		}
		if err := os.WriteFile(filepath.Join(rendered, p.ComponentsFile), y, 0o644); err != nil {
			return 1, err
		}
	}
	capi, err := envtest.ClusterAPIModule()
	if err != nil {
		return 1, err
	}
	scheme, err := envtest.NewScheme()
	if err != nil {
		return 1, err
	}
	for _, mod := range managertest.All() {
		if err := mod.AddToScheme(scheme); err != nil {
			return 1, fmt.Errorf("failed to add module %s to the scheme: %w", mod.Name(), err)
		}
	}
	env, err = envtest.Start(ctx, envtest.Options{
		Scheme: scheme,
		CRDDirectoryPaths: []string{
			filepath.Join(capi.Dir, "bootstrap", "kubeadm", "config", "crd", "bases"),
			filepath.Join(capi.Dir, "controlplane", "kubeadm", "config", "crd", "bases"),
			certManagerCRDs,
			rendered,
		},
		WebhookInstallOptions: crenvtest.WebhookInstallOptions{Paths: []string{rendered}},
	})
	if err != nil {
		return 1, err
	}
	defer func() { reterr = errors.Join(reterr, env.Stop()) }()
	return m.Run(), nil
}

// clusterctl is clusterctl's own client, configured with the clusterctl.yaml
// of the test repository.
func clusterctlClient(ctx context.Context) (client.Client, error) {
	c, err := client.New(ctx, filepath.Join(repoDir, bundle.ClusterctlConfigFile))
	if err != nil {
		return nil, fmt.Errorf("failed to create the clusterctl client: %w", err)
	}
	return c, nil
}
