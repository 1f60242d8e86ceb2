package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/capicore"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var (
	env  *envtest.Environment
	core *capicore.Process
)

// TestMain starts the apiserver with Cluster API's and every module's CRDs,
// and Cluster API core as a process; the tests start capi-monolith.
func TestMain(m *testing.M) {
	ctrl.SetLogger(envtest.TestLogger())
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	var crds []string
	for _, module := range []string{"infra", "ipam", "machinepool"} {
		crds = append(crds, filepath.Join("..", "..", "manifests", module, "crd"))
	}
	scheme, err := envtest.NewScheme()
	if err == nil {
		err = ipamv1alpha1.AddToScheme(scheme)
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
		CRDDirectoryPaths: crds,
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
	core, err = capicore.Start(ctx, capicore.Options{Config: env.Config})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "Cluster API core output:\n%s\n", core.Output())
	}
	if err := core.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}
