package capie2e

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
	"sigs.k8s.io/cluster-api/test/framework/ginkgoextensions"
)

// ownVersion is the version `capi-monolith dev` records for our providers
// in clusterctl's inventory (dev.DefaultProviderVersion): the repository is
// written at it, so that clusterctl finds our templates there.
const ownVersion = "v0.1.0"

const (
	// devStartTimeout bounds `capi-monolith dev` from exec to ready on a
	// loaded 2-core machine.
	devStartTimeout = 3 * time.Minute
	// devStopTimeout bounds its Ctrl-C.
	devStopTimeout = time.Minute
)

var (
	configPath     string
	artifactFolder string
	binaryPath     string
	kubeconfigPath string
	skipCleanup    bool
)

func init() {
	flag.StringVar(&configPath, "e2e.config", "config/monolith.yaml", "Cluster API's e2e configuration (E2EConfig) for capi-monolith.")
	flag.StringVar(&artifactFolder, "e2e.artifacts-folder", "_artifacts", "Where the repository, the dev logs and each spec's resource dumps go.")
	flag.StringVar(&binaryPath, "e2e.binary", "../../bin/capi-monolith", "The capi-monolith binary (make build).")
	flag.StringVar(&kubeconfigPath, "e2e.kubeconfig", "", "The kubeconfig of a capi-monolith dev that runs already; by default the suite starts its own and stops it at the end.")
	flag.BoolVar(&skipCleanup, "e2e.skip-resource-cleanup", false, "Leave each spec's namespace and clusters behind.")
}

var (
	ctx = ctrl.SetupSignalHandler()

	e2eConfig            *clusterctl.E2EConfig
	clusterctlConfigPath string
	bootstrap            framework.ClusterProxy
	dev                  *devProcess
)

func TestCAPIE2E(t *testing.T) {
	g := NewWithT(t)
	ctrl.SetLogger(klog.Background())
	var err error
	for _, p := range []*string{&configPath, &artifactFolder, &binaryPath} {
		*p, err = filepath.Abs(*p)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(os.MkdirAll(artifactFolder, 0o750)).To(Succeed())
	RegisterFailHandler(Fail)
	w, err := ginkgoextensions.EnableFileLogging(filepath.Join(artifactFolder, "ginkgo-log.txt"))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Close()
	RunSpecs(t, "capi-monolith: Cluster API's e2e specs against capi-monolith dev")
}

var _ = BeforeSuite(func() {
	Expect(binaryPath).To(BeAnExistingFile(), "the capi-monolith binary (make build), or -e2e.binary")

	By("Loading the e2e configuration " + configPath)
	e2eConfig = clusterctl.LoadE2EConfig(ctx, clusterctl.LoadE2EConfigInput{ConfigPath: configPath})

	By("Writing capi-monolith's clusterctl repository at " + ownVersion + " with capi-monolith bundle")
	repository := filepath.Join(artifactFolder, "repository")
	Expect(os.RemoveAll(repository)).To(Succeed())
	out, err := exec.CommandContext(ctx, binaryPath, "bundle", "--version", ownVersion, "--out", repository).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "capi-monolith bundle: %s", out)
	// The e2e configuration's variables, as the framework's own
	// repository would carry them.
	clusterctlConfigPath = filepath.Join(repository, "clusterctl-e2e.yaml")
	Expect(clusterctl.CopyAndAmendClusterctlConfig(ctx, clusterctl.CopyAndAmendClusterctlConfigInput{
		ClusterctlConfigPath: filepath.Join(repository, "clusterctl.yaml"),
		OutputPath:           clusterctlConfigPath,
		Variables:            e2eConfig.Variables,
	})).To(Succeed())

	if kubeconfigPath == "" {
		By("Starting capi-monolith dev")
		dev = startDev(filepath.Join(artifactFolder, "dev"))
		kubeconfigPath = dev.kubeconfig
	}
	scheme := runtime.NewScheme()
	framework.TryAddDefaultSchemes(scheme)
	bootstrap = framework.NewClusterProxy("bootstrap", kubeconfigPath, scheme)
	Expect(bootstrap).NotTo(BeNil())
})

var _ = AfterSuite(func() {
	if bootstrap != nil {
		bootstrap.Dispose(ctx)
	}
	if dev != nil {
		By("Stopping capi-monolith dev")
		dev.stop()
	}
})

// devProcess is a `capi-monolith dev` the suite started.
type devProcess struct {
	cmd        *exec.Cmd
	exited     chan error
	kubeconfig string
	log        string
}

// startDev runs `capi-monolith dev` with its state and logs under dir and
// waits until it prints its kubeconfig line.
func startDev(dir string) *devProcess {
	Expect(os.RemoveAll(dir)).To(Succeed())
	Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
	d := &devProcess{exited: make(chan error, 1), kubeconfig: filepath.Join(dir, "kubeconfig"), log: filepath.Join(dir, "dev.log")}
	logFile, err := os.Create(d.log)
	Expect(err).NotTo(HaveOccurred())
	// A --data-dir of the artifacts keeps the managers' logs
	// (<dir>/state/logs) for a failed spec; it is emptied at every start.
	d.cmd = exec.Command(binaryPath, "dev", "--data-dir", filepath.Join(dir, "state"), "--kubeconfig-out", d.kubeconfig)
	d.cmd.Dir = dir
	d.cmd.Stderr = logFile
	stdout, err := d.cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(d.cmd.Start()).To(Succeed())
	go func() {
		d.exited <- d.cmd.Wait()
		_ = logFile.Close()
	}()
	ready := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if strings.HasPrefix(scanner.Text(), "kubeconfig: ") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case err := <-d.exited:
		Fail(fmt.Sprintf("capi-monolith dev exited before it was ready (%v); its output is in %s", err, d.log))
	case <-time.After(devStartTimeout):
		_ = d.cmd.Process.Kill()
		Fail(fmt.Sprintf("capi-monolith dev was not ready within %s; its output is in %s", devStartTimeout, d.log))
	}
	return d
}

// stop sends Ctrl-C and waits for a clean exit.
func (d *devProcess) stop() {
	Expect(d.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	select {
	case err := <-d.exited:
		Expect(err).NotTo(HaveOccurred(), "capi-monolith dev's exit after Ctrl-C; its output is in %s", d.log)
	case <-time.After(devStopTimeout):
		_ = d.cmd.Process.Kill()
		Fail(fmt.Sprintf("capi-monolith dev did not stop within %s of Ctrl-C; its output is in %s", devStopTimeout, d.log))
	}
}
