package dev_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	"github.com/capi-monolith/capi-monolith/dev"
)

const (
	startTimeout = 3 * time.Minute
	exitTimeout  = time.Minute
)

// binary is capi-monolith built once for the suite by TestMain.
var binary string

// devWebhookConfigurations are webhook configurations dev installs (both
// kinds, one name): Cluster API's managers' and a module's.
var devWebhookConfigurations = []string{
	"capi-monolith-dev-core", "capi-monolith-dev-kubeadm-bootstrap", "capi-monolith-dev-kubeadm-control-plane", "capi-monolith-dev-infra",
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capi-monolith-dev-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "capi-monolith")
	build := exec.Command("go", "build", "-o", binary, "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// running is a `capi-monolith dev` process started by a test.
type running struct {
	cmd        *exec.Cmd
	stderr     *lockedBuffer
	exited     chan error
	done       chan struct{}
	kubeconfig string
	client     client.Client
}

// startBinary runs `capi-monolith dev args...` in dir and waits until it
// prints its kubeconfig line.
func startBinary(t *testing.T, g Gomega, dir string, args ...string) *running {
	t.Helper()
	r := &running{stderr: &lockedBuffer{}, exited: make(chan error, 1), done: make(chan struct{})}
	r.kubeconfig = filepath.Join(dir, "dev.kubeconfig")
	r.cmd = exec.Command(binary, append([]string{"dev", "--kubeconfig-out=" + r.kubeconfig}, args...)...)
	r.cmd.Dir = dir
	stdout, err := r.cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	r.cmd.Stderr = r.stderr
	started := time.Now()
	g.Expect(r.cmd.Start()).To(Succeed())
	go func() {
		err := r.cmd.Wait()
		close(r.done)
		r.exited <- err
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
			return
		default:
		}
		// Only if the test failed half way: never leave the tree running.
		_ = r.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-r.done:
		case <-time.After(exitTimeout):
			_ = r.cmd.Process.Kill()
		}
	})

	ready := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if path, ok := strings.CutPrefix(scanner.Text(), "kubeconfig: "); ok {
				ready <- path
			}
		}
	}()
	select {
	case path := <-ready:
		g.Expect(path).To(Equal(r.kubeconfig))
	case err := <-r.exited:
		t.Fatalf("capi-monolith dev exited before it was ready: %v\n%s", err, r.stderr.String())
	case <-time.After(startTimeout):
		t.Fatalf("capi-monolith dev not ready within %s:\n%s", startTimeout, r.stderr.String())
	}
	t.Logf("capi-monolith dev %v ready in %s (from exec to the kubeconfig line)", args, time.Since(started).Round(time.Millisecond))

	cfg, err := clientcmd.BuildConfigFromFlags("", r.kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	scheme, err := testScheme()
	g.Expect(err).NotTo(HaveOccurred())
	r.client, err = client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return r
}

// interrupt sends Ctrl-C and waits for a clean exit.
func (r *running) interrupt(t *testing.T, g Gomega) {
	t.Helper()
	stopping := time.Now()
	g.Expect(r.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	g.Eventually(r.exited).WithTimeout(exitTimeout).Should(Receive(BeNil()), "exit status 0 after Ctrl-C:\n%s", r.stderr)
	t.Logf("stopped in %s after SIGINT", time.Since(stopping).Round(time.Millisecond))
}

// A --data-dir environment keeps what was stored across a restart, and
// everything dev installs is there again after it.
func TestDataDirResumesWhereTheLastRunStopped(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "state")

	first := startBinary(t, g, dir, "--data-dir="+dataDir, "--quiet")
	ctx := t.Context()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	g.Expect(first.client.Create(ctx, cm)).To(Succeed())
	expectInstalled(ctx, g, first.client, dataDir)
	g.Expect(first.stderr.String()).To(BeEmpty(), "--quiet prints nothing")
	first.interrupt(t, g)
	g.Expect(filepath.Join(dataDir, "etcd")).To(BeADirectory(), "etcd's data is kept")
	g.Expect(first.kubeconfig).To(BeARegularFile(), "a kept environment keeps its kubeconfig")

	// Widened meanwhile (a copy, a umask, a chmod -R): dev makes the folder
	// private again before it uses it; it holds etcd's data and keys.
	setModes(g, dataDir, 0o755, 0o644)

	second := startBinary(t, g, dir, "--data-dir="+dataDir)
	expectPrivate(g, dataDir)
	got := &corev1.ConfigMap{}
	g.Expect(second.client.Get(ctx, client.ObjectKeyFromObject(cm), got)).To(Succeed())
	g.Expect(got.Data).To(HaveKeyWithValue("k", "v"))
	g.Expect(got.UID).To(Equal(cm.UID))
	expectInstalled(ctx, g, second.client, dataDir)
	second.interrupt(t, g)
}

// setModes gives every folder under dir (itself included) dirMode and every
// file fileMode.
func setModes(g Gomega, dir string, dirMode, fileMode os.FileMode) {
	g.Expect(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		g.Expect(err).NotTo(HaveOccurred())
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return nil
		case d.IsDir():
			return os.Chmod(path, dirMode)
		default:
			return os.Chmod(path, fileMode)
		}
	})).To(Succeed())
}

// expectPrivate checks that every folder under dir (itself included) is
// 0700 and no file is open to group or others. Files that go away while it
// looks (etcd's) are skipped.
func expectPrivate(g Gomega, dir string) {
	files := 0
	g.Expect(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		g.Expect(err).NotTo(HaveOccurred())
		info, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		g.Expect(err).NotTo(HaveOccurred())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
		case info.IsDir():
			g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o700)), path)
		default:
			files++
			g.Expect(info.Mode().Perm()&0o077).To(BeZero(), "%s is %s", path, info.Mode())
		}
		return nil
	})).To(Succeed())
	g.Expect(files).To(BeNumerically(">", 5), "etcd's data, keys, kubeconfig and logs were looked at")
}

// expectInstalled checks what Start promises: CRDs (core's and ours), core's
// and our webhooks served on loopback with the CA in the data folder, and
// the ExtensionConfig.
func expectInstalled(ctx context.Context, g Gomega, c client.Client, dataDir string) {
	for _, name := range []string{"clusters.cluster.x-k8s.io", "machinepools.cluster.x-k8s.io", "kubeadmconfigs.bootstrap.cluster.x-k8s.io", "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "monolithmachines.infrastructure.cluster.x-k8s.io", "monolithippools.ipam.cluster.x-k8s.io"} {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed(), name)
	}
	ca, err := os.ReadFile(filepath.Join(dataDir, "certs", "ca.crt"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range devWebhookConfigurations {
		wh := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, wh)).To(Succeed(), name)
		g.Expect(*wh.Webhooks[0].ClientConfig.URL).To(HavePrefix("https://127.0.0.1:"), name)
		g.Expect(wh.Webhooks[0].ClientConfig.CABundle).To(Equal(ca), name)
	}
	ext := &runtimev1.ExtensionConfig{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: dev.DefaultExtensionConfigName}, ext)).To(Succeed())
	g.Expect(ext.Spec.ClientConfig.URL).To(HavePrefix("https://127.0.0.1:"))
	g.Expect(ext.Spec.ClientConfig.CABundle).To(Equal(ca))
}

// The command as a user runs it: the built binary, ready, then Ctrl-C
// (SIGINT): it exits cleanly and no process it started survives.
func TestCtrlCStopsTheBinaryAndEveryChild(t *testing.T) {
	g := NewWithT(t)
	r := startBinary(t, g, t.TempDir())
	// stderr is copied by its own goroutine: it may trail stdout a little.
	g.Eventually(r.stderr.String).WithTimeout(5 * time.Second).Should(And(
		ContainSubstring("Ready in"),
		ContainSubstring("export KUBECONFIG="+r.kubeconfig),
	))
	// The kubeconfig reaches a cluster with Cluster API's and our CRDs.
	g.Expect(r.client.Get(t.Context(), client.ObjectKey{Name: "monolithclusters.infrastructure.cluster.x-k8s.io"}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())

	children := descendants(r.cmd.Process.Pid)
	names := map[string]bool{}
	for _, pid := range children {
		names[processName(pid)] = true
	}
	g.Expect(names).To(HaveKey("etcd"))
	g.Expect(names).To(HaveKey("kube-apiserver"))
	g.Expect(names).To(HaveKey("manager"), "Cluster API core's manager")
	g.Expect(names).To(HaveKey(kubeControllerManagerComm))
	// Every listener of ours is on loopback: dev's webhook server (which
	// serves the runtime extension too), etcd, kube-apiserver and
	// kube-controller-manager. Core's webhook server has no host flag
	// upstream and binds every interface.
	expectLoopbackOnly(g, r.cmd.Process.Pid, "capi-monolith dev")
	for _, pid := range children {
		if name := processName(pid); name == "etcd" || name == "kube-apiserver" || name == kubeControllerManagerComm {
			expectLoopbackOnly(g, pid, name)
		}
		// etcd holds every Secret: loopback is not enough, every local
		// user reaches it there.
		if processName(pid) == "etcd" {
			expectEtcdRefusesClientsWithoutACertificate(g, pid, stateDirOf(g, r))
		}
	}

	r.interrupt(t, g)
	for _, pid := range children {
		g.Eventually(func() error { return syscall.Kill(pid, 0) }).WithTimeout(10*time.Second).
			Should(MatchError(syscall.ESRCH), "child %d (%v) survived", pid, names)
	}
	g.Expect(r.kubeconfig).NotTo(BeAnExistingFile(), "a temporary environment's kubeconfig is removed")
}

// descendants returns the ids of every process below pid, from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			if pp, err := strconv.Atoi(fields[1]); err == nil {
				parent[p] = pp
			}
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// kubeControllerManagerComm is kube-controller-manager's processName: the
// kernel keeps 15 characters of a command's name.
const kubeControllerManagerComm = "kube-controller"

func processName(pid int) string {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(comm))
}

// lockedBuffer is an io.Writer safe to read while exec's goroutine writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
