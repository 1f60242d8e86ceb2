package main

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/test/envtest"
	"github.com/capi-monolith/capi-monolith/test/managertest"
)

// These fail before any kubeconfig is read: no cluster is reachable here.
func TestRunRejectsBadFlagsAtStartup(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "an unknown module names the valid ones", args: []string{"--enable-modules=infra,dns"}, wantErr: `unknown module(s) "dns" in --enable-modules: valid modules are infra, machinepool, ipam, runtimeext`},
		{name: "machinepool without infra is refused, naming infra", args: []string{"--enable-modules=machinepool,ipam"}, wantErr: `module "machinepool" requires module "infra": add it to --enable-modules`},
		{name: "a bad module flag is refused", args: []string{"--docker-unprivileged-nodes=maybe"}, wantErr: "docker-unprivileged-nodes"},
		{name: "an empty module list is refused", args: []string{"--enable-modules="}, wantErr: "--enable-modules is empty"},
		{name: "a concurrency below one is refused", args: []string{"--ipam-concurrency=0"}, wantErr: "must be at least 1"},
		{name: "a negative webhook port is refused", args: []string{"--webhook-port=-1"}, wantErr: "--webhook-port must be between 0 and 65535"},
		{name: "an impossible lease timing is refused", args: []string{"--leader-elect", "--leader-elect-renew-deadline=1m"}, wantErr: "leader election needs"},
		{name: "an unknown command is refused", args: []string{"serve"}, wantErr: `unknown command "serve"`},
		{name: "stray arguments after flags are refused", args: []string{"--leader-elect=false", "serve"}, wantErr: `unexpected arguments ["serve"]`},
		{name: "an unknown flag is refused", args: []string{"--no-such-flag"}, wantErr: "unknown flag: --no-such-flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(run(context.Background(), tt.args)).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

func TestRegistryHasTheFourModulesInSetupOrder(t *testing.T) {
	g := NewWithT(t)
	g.Expect(registry().Names()).To(Equal([]string{"infra", "machinepool", "ipam", "runtimeext"}))
	var names []string
	for _, m := range managertest.All() {
		names = append(names, m.Name())
	}
	g.Expect(names).To(Equal(registry().Names()), "test/managertest builds the same modules as the binary")
}

func TestRunServesHealthAgainstARealAPIServerAndStopsOnCancel(t *testing.T) {
	g := NewWithT(t)
	ctrl.SetLogger(envtest.TestLogger())
	crds, err := filepath.Glob(filepath.Join("manifests", "*", "crd"))
	g.Expect(err).NotTo(HaveOccurred())
	env, err := envtest.Start(context.Background(), envtest.Options{CRDDirectoryPaths: crds})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(env.Stop()).To(Succeed()) })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())

	healthAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--kubeconfig=" + kubeconfig,
			"--health-addr=" + healthAddr,
			"--diagnostics-address=0", "--insecure-diagnostics",
			"--webhook-port=0",
			"--enable-modules=ipam,infra",
		})
	}()
	g.Eventually(func() (int, error) {
		resp, err := http.Get("http://" + healthAddr + "/readyz")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}, 30*time.Second).Should(Equal(http.StatusOK))

	cancel()
	g.Eventually(done, 30*time.Second).Should(Receive(BeNil()))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
