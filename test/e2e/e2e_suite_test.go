package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/dev"
	"github.com/capi-monolith/capi-monolith/dev/progress"
	"github.com/capi-monolith/capi-monolith/infra"
	"github.com/capi-monolith/capi-monolith/ipam"
	"github.com/capi-monolith/capi-monolith/machinepool"
	"github.com/capi-monolith/capi-monolith/modules"
	"github.com/capi-monolith/capi-monolith/runtimeext"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// env is the dev environment every spec runs on.
var env *dev.Environment

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "capi-monolith end-to-end")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(envtest.TestLogger())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	started := time.Now()
	var err error
	// The Docker daemon here refuses privileged containers, and the test
	// node image needs none.
	infraOpts := infra.DefaultOptions()
	infraOpts.DockerUnprivilegedNodes = true
	infraModule := infra.New(infraOpts)
	env, err = dev.Start(ctx, dev.Options{
		Modules: []modules.Module{
			infraModule,
			machinepool.New(infraModule.Machines(), machinepool.DefaultOptions()),
			ipam.New(ipam.DefaultOptions()),
			runtimeext.New(runtimeext.DefaultOptions()),
		},
		Progress: progress.New(GinkgoWriter),
	})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("dev environment ready in %s\n", time.Since(started).Round(time.Millisecond))
})

var _ = AfterSuite(func() {
	if env == nil {
		return
	}
	if CurrentSpecReport().Failed() {
		GinkgoWriter.Printf("Cluster API core output:\n%s\n", env.Core.Output())
	}
	Expect(env.Stop()).To(Succeed())
})
