package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// kubectlBinary is the real kubectl a user runs; the specs of alive_test.go
// talk to workload clusters through it, not through a client library.
const kubectlBinary = "/usr/bin/kubectl"

// Bounds of the waits of a living cluster, sized for two loaded cores:
// KCP adds control plane machines one at a time, each waiting for the one
// before to be healthy in the workload API.
const (
	aliveTimeout   = 8 * time.Minute
	rolloutTimeout = 10 * time.Minute
	alivePoll      = time.Second
)

// workloadKubeconfig writes the cluster's kubeconfig as a user gets it,
// with the real clusterctl of the tool cache (`clusterctl get kubeconfig`,
// reading the management cluster through the dev environment's admin
// kubeconfig), into dir, and returns its path.
func workloadKubeconfig(ctx context.Context, dir, namespace, name string) string {
	Expect(env.Clusterctl).NotTo(BeEmpty(), "clusterctl is not in the tool cache: run `make clusterctl` or set CLUSTERCTL")
	cmd := exec.CommandContext(ctx, env.Clusterctl, "get", "kubeconfig", name, "-n", namespace, "--kubeconfig", env.KubeconfigPath)
	// clusterctl keeps its config under $HOME; give it one of its own.
	cmd.Env = append(os.Environ(), "HOME="+GinkgoT().TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "clusterctl get kubeconfig: %s", stderr.String())
	Expect(string(out)).To(ContainSubstring("certificate-authority-data"))
	path := filepath.Join(dir, name+".kubeconfig")
	Expect(os.WriteFile(path, out, 0o600)).To(Succeed())
	return path
}

// kubectl runs the real kubectl against a workload cluster and returns
// its standard output.
func kubectl(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, kubectlBinary, append([]string{"--kubeconfig", kubeconfig, "--request-timeout", "20s"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// readyNodes lists the workload cluster's Nodes as `kubectl get nodes`
// prints them and returns the names of those whose STATUS is Ready, and
// of all.
func readyNodes(ctx context.Context, kubeconfig string) (ready, all []string, err error) {
	out, err := kubectl(ctx, kubeconfig, "get", "nodes", "--no-headers")
	if err != nil {
		return nil, nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		all = append(all, fields[0])
		if fields[1] == "Ready" {
			ready = append(ready, fields[0])
		}
	}
	return ready, all, nil
}

// clusterDump describes the Cluster, its KubeadmControlPlane and its
// Machines with their conditions: what a failed wait prints.
func clusterDump(ctx context.Context, namespace, name string) func() string {
	return func() string {
		var b strings.Builder
		cluster := &clusterv1.Cluster{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster); err != nil {
			fmt.Fprintf(&b, "Cluster %s: %v\n", name, err)
		} else {
			fmt.Fprintf(&b, "Cluster %s phase=%s endpoint=%s:%d\n", name, cluster.Status.Phase, cluster.Spec.ControlPlaneEndpoint.Host, cluster.Spec.ControlPlaneEndpoint.Port)
			writeConditions(&b, cluster.Status.Conditions)
		}
		kcps := &controlplanev1.KubeadmControlPlaneList{}
		if err := kubeadmClient().List(ctx, kcps, client.InNamespace(namespace)); err != nil {
			fmt.Fprintf(&b, "KubeadmControlPlanes: %v\n", err)
		}
		for _, kcp := range kcps.Items {
			fmt.Fprintf(&b, "KubeadmControlPlane %s version=%s replicas=%v ready=%v upToDate=%v\n", kcp.Name, kcp.Spec.Version, ptrString(kcp.Spec.Replicas), ptrString(kcp.Status.ReadyReplicas), ptrString(kcp.Status.UpToDateReplicas))
			writeConditions(&b, kcp.Status.Conditions)
		}
		machines := &clusterv1.MachineList{}
		if err := env.Client.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
			fmt.Fprintf(&b, "Machines: %v\n", err)
		}
		for _, m := range machines.Items {
			fmt.Fprintf(&b, "Machine %s phase=%s version=%s node=%q deleting=%v\n", m.Name, m.Status.Phase, m.Spec.Version, m.Status.NodeRef.Name, m.DeletionTimestamp != nil)
			writeConditions(&b, m.Status.Conditions)
		}
		return b.String()
	}
}

func writeConditions(b *strings.Builder, conds []metav1.Condition) {
	for _, c := range conds {
		fmt.Fprintf(b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, oneLine(c.Message))
	}
}

// hexAddress matches the pointers Gomega prints, which differ on every poll.
var hexAddress = regexp.MustCompile(`0x[0-9a-f]+`)

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " | ")
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

// dialFails reports nil once nothing accepts a TCP connection at address.
func dialFails(address string) error {
	conn, err := net.DialTimeout("tcp", address, 2*time.Second)
	if err != nil {
		return nil
	}
	_ = conn.Close()
	return fmt.Errorf("%s still accepts connections", address)
}

// reporting turns a check into a poll function for Eventually that also
// writes each new reason it fails for to the GinkgoWriter: a wait of
// minutes shows where it stands while it runs.
func reporting(check func(g Gomega)) func() error {
	last := ""
	return func() error {
		err := InterceptGomegaFailure(func() { check(Default) })
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != last {
			GinkgoWriter.Printf("%s waiting: %s\n", time.Now().UTC().Format("15:04:05"), oneLine(hexAddress.ReplaceAllString(msg, "0x…")))
			last = msg
		}
		return err
	}
}

var (
	kubeadmClientOnce sync.Once
	kubeadmClientVal  client.Client
)

// kubeadmClient is a client of the dev environment whose scheme also has
// Cluster API's kubeadm types, which env.Client's lacks.
func kubeadmClient() client.Client {
	kubeadmClientOnce.Do(func() {
		scheme := runtime.NewScheme()
		for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, controlplanev1.AddToScheme, bootstrapv1.AddToScheme} {
			Expect(add(scheme)).To(Succeed())
		}
		c, err := client.New(env.Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		kubeadmClientVal = c
	})
	return kubeadmClientVal
}
