package e2e

import (
	"context"
	"fmt"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// helmClient installs and uninstalls charts in a workload cluster with
// Helm's own Go SDK, as `helm install --wait` and `helm uninstall --wait`
// do.
type helmClient struct {
	getter    *genericclioptions.ConfigFlags
	namespace string
}

func newHelm(kubeconfig, namespace string) *helmClient {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &namespace
	return &helmClient{getter: flags, namespace: namespace}
}

func (h *helmClient) config() (*action.Configuration, error) {
	cfg := new(action.Configuration)
	if err := cfg.Init(h.getter, h.namespace, "secret"); err != nil {
		return nil, fmt.Errorf("initialising Helm: %w", err)
	}
	return cfg, nil
}

// install installs the chart in dir as release name, waiting (kstatus) for
// every resource to be ready, and returns the release's status.
func (h *helmClient) install(ctx context.Context, dir, name string, timeout time.Duration) (string, error) {
	cfg, err := h.config()
	if err != nil {
		return "", err
	}
	chart, err := loader.LoadDir(dir)
	if err != nil {
		return "", fmt.Errorf("loading chart %s: %w", dir, err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName = name
	install.Namespace = h.namespace
	install.WaitStrategy = kube.StatusWatcherStrategy
	install.Timeout = timeout
	rel, err := install.RunWithContext(ctx, chart, nil)
	if err != nil {
		return "", fmt.Errorf("helm install %s: %w", name, err)
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return "", fmt.Errorf("helm install %s: unexpected release type %T", name, rel)
	}
	return r.Info.Status.String(), nil
}

// uninstall removes release name and waits for its resources to be gone.
func (h *helmClient) uninstall(_ context.Context, name string, timeout time.Duration) error {
	cfg, err := h.config()
	if err != nil {
		return err
	}
	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy = kube.StatusWatcherStrategy
	uninstall.Timeout = timeout
	if _, err := uninstall.Run(name); err != nil {
		return fmt.Errorf("helm uninstall %s: %w", name, err)
	}
	return nil
}
