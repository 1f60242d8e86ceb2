package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"

	"github.com/capi-monolith/capi-monolith/dev/capimanager"
	"github.com/capi-monolith/capi-monolith/dev/capimodule"
	"github.com/capi-monolith/capi-monolith/dev/crds"
	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var (
	env *envtest.Environment
	// capi are Cluster API's own managers as processes, core first, then
	// the kubeadm bootstrap and control plane providers: what `clusterctl
	// init` installs by default beside an infrastructure provider.
	capi []*capimanager.Process
)

// TestMain starts the apiserver with Cluster API's (core and kubeadm) and
// every module's CRDs, and Cluster API's core, kubeadm bootstrap and
// kubeadm control plane managers as processes, which live as long as the
// suite; the tests start capi-monolith.
func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	var crdDirs []string
	for _, module := range []string{"infra", "ipam", "machinepool"} {
		crdDirs = append(crdDirs, filepath.Join("..", "..", "manifests", module, "crd"))
	}
	scheme, err := envtest.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{ipamv1alpha1.AddToScheme, bootstrapv1.AddToScheme, controlplanev1.AddToScheme} {
		if err == nil {
			err = add(scheme)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "capi-monolith-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	flags, err := auditFlags(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A graceful stop of kube-apiserver (RestartAPIServer) waits up to the
	// request timeout (default 1 minute) for open connections.
	flags["request-timeout"] = "10s"
	env, err = envtest.Start(ctx, envtest.Options{
		Scheme:            scheme,
		CRDDirectoryPaths: crdDirs,
		APIServerFlags:    flags,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	if err := installKubeadmCRDs(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The managers' whole output, kept when the suite fails: the last
	// lines the suite prints rarely reach back to the cause.
	logDir, err := os.MkdirTemp("", "capi-monolith-chaos-logs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	capi, err = startClusterAPI(ctx, logDir)
	defer func() {
		if err := stopClusterAPI(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		for _, p := range capi {
			fmt.Fprintf(os.Stderr, "%s output:\n%s\n", p.Manager().Title, p.Output())
		}
		fmt.Fprintf(os.Stderr, "Cluster API's managers' whole output: %s\n", logDir)
	} else {
		_ = os.RemoveAll(logDir)
	}
	return code
}

// installKubeadmCRDs installs the kubeadm providers' CRDs as their release
// manifests carry them (with the contract label core reads to pick the
// served version); envtest installs core's.
func installKubeadmCRDs(ctx context.Context) error {
	module, err := capimodule.Locate()
	if err != nil {
		return err
	}
	var list []*apiextensionsv1.CustomResourceDefinition
	for _, c := range []capimodule.Component{capimodule.KubeadmBootstrap, capimodule.KubeadmControlPlane} {
		theirs, err := crds.ReadClusterAPI(module.ComponentCRDDirectory(c))
		if err != nil {
			return err
		}
		list = append(list, theirs...)
	}
	return crds.Install(ctx, env.Config, list)
}

// startClusterAPI starts Cluster API's three managers at once (each waits
// for its own readiness; on 2 cores the waits overlap), each writing its
// output to logDir/<name>.log. On error, what started is returned for
// stopClusterAPI to stop.
func startClusterAPI(ctx context.Context, logDir string) ([]*capimanager.Process, error) {
	managers := capimanager.All()
	procs := make([]*capimanager.Process, len(managers))
	errs := make([]error, len(managers))
	// Every log is open before any process starts: a failure here leaves
	// nothing running. They are closed when the suite's process ends,
	// after the managers.
	outs := make([]*os.File, len(managers))
	for i, mgr := range managers {
		var err error
		if outs[i], err = os.Create(filepath.Join(logDir, mgr.Name+".log")); err != nil {
			return nil, fmt.Errorf("failed to create the log of %s: %w", mgr.Title, err)
		}
	}
	var wg sync.WaitGroup
	for i, mgr := range managers {
		wg.Go(func() {
			procs[i], errs[i] = capimanager.Start(ctx, capimanager.Options{Manager: mgr, Config: env.Config, Output: outs[i]})
		})
	}
	wg.Wait()
	var started []*capimanager.Process
	for _, p := range procs {
		if p != nil {
			started = append(started, p)
		}
	}
	return started, errors.Join(errs...)
}

// stopClusterAPI stops every manager and removes what it installed
// (webhook configurations, the CRDs' conversion).
func stopClusterAPI() error {
	var errs []error
	for _, p := range capi {
		errs = append(errs, p.Stop())
	}
	return errors.Join(errs...)
}
