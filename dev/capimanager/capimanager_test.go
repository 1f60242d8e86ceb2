package capimanager_test

import (
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/dev/capimanager"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	envtest.Main(m, &env, envtest.Options{})
}

// A core process that dies after it was ready is started again, within
// Options.Restarts, and each death is reported; then it is left dead.
func TestADeadCoreIsRestartedThenReported(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	var reports []bool
	core, err := capimanager.Start(t.Context(), capimanager.Options{
		Manager:  capimanager.Core,
		Config:   env.Config,
		Restarts: 1,
		OnExit: func(_ error, restarting bool) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, restarting)
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = core.Stop() })
	reported := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), reports...)
	}

	first := core.PID()
	g.Expect(syscall.Kill(-first, syscall.SIGKILL)).To(Succeed())
	g.Eventually(reported).WithTimeout(30 * time.Second).Should(Equal([]bool{true}))
	g.Eventually(core.PID).WithTimeout(30 * time.Second).ShouldNot(Equal(first))
	g.Eventually(func() (int, error) {
		resp, err := http.Get("http://" + core.HealthAddress() + "/readyz")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(60*time.Second).Should(Equal(http.StatusOK), "the restarted process is ready again on the same ports")
	g.Expect(core.Exited()).NotTo(BeClosed())

	g.Expect(syscall.Kill(-core.PID(), syscall.SIGKILL)).To(Succeed())
	g.Eventually(core.Exited()).WithTimeout(30 * time.Second).Should(BeClosed())
	g.Expect(reported()).To(Equal([]bool{true, false}), "the last death is reported as final")
	g.Expect(core.Err()).To(HaveOccurred())
	g.Expect(core.Stop()).To(Succeed())
}

// Which manager to run is not guessed.
func TestStartNeedsAManager(t *testing.T) {
	g := NewWithT(t)
	_, err := capimanager.Start(t.Context(), capimanager.Options{Config: env.Config})
	g.Expect(err).To(MatchError(ContainSubstring("Options.Manager is required")))
}
