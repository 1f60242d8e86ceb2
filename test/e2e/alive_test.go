package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// upgradeVersion is the Kubernetes minor after kubernetesVersion: KCP and
// the MachineDeployment roll to it.
const upgradeVersion = "v1.37.0"

// A cluster of the default flavor as a user makes it (KubeadmControlPlane
// of 3, MachineDeployment of 2), alive: its workload API answers the real
// kubectl, a MachineHealthCheck remediates through it, KCP scales and both
// roll to the next minor, and deleting the cluster frees its listener.
var _ = Describe("A living cluster from cluster-template.yaml (inMemory backend, KCP 3 + 2 workers)", Ordered, func() {
	const (
		name    = "alive"
		workers = 2
	)
	var (
		namespace  string
		kubeconfig string
		dump       func() string
		// dir outlives every spec of the container (a spec's TempDir does not).
		dir string
	)

	BeforeAll(func(ctx SpecContext) {
		namespace = createNamespace(ctx, "e2e-alive")
		vars := templateVars(namespace, name)
		vars["CONTROL_PLANE_MACHINE_COUNT"] = "3"
		vars["WORKER_MACHINE_COUNT"] = strconv.Itoa(workers)
		apply(ctx, render("cluster-template.yaml", vars))
		dump = clusterDump(context.Background(), namespace, name)
		dir = GinkgoT().TempDir()
	})

	It("should come alive: Cluster and KCP Available, every Machine Running, 5 Ready nodes in kubectl", func(ctx SpecContext) {
		machines := expectAlive(ctx, namespace, name, 3, workers, kubernetesVersion, dump)
		for _, m := range machines {
			Expect(m.Status.NodeRef.Name).To(Equal(m.Name), "the Node is named after its machine")
		}

		kubeconfig = workloadKubeconfig(ctx, dir, namespace, name)
		Eventually(ctx, func(g Gomega) {
			ready, all, err := readyNodes(ctx, kubeconfig)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(all).To(HaveLen(3 + workers))
			g.Expect(ready).To(ConsistOf(all))
		}).WithTimeout(provisionTimeout).WithPolling(alivePoll).Should(Succeed(), dump)
	})

	It("should replace a worker whose Node is set Ready=False through the workload API (MachineHealthCheck)", func(ctx SpecContext) {
		mhc := &clusterv1.MachineHealthCheck{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-md-0"},
			Spec: clusterv1.MachineHealthCheckSpec{
				ClusterName: name,
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: name + "-md-0"}},
				Checks: clusterv1.MachineHealthCheckChecks{
					UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
						{Type: "Ready", Status: "False", TimeoutSeconds: ptr.To[int32](5)},
						{Type: "Ready", Status: "Unknown", TimeoutSeconds: ptr.To[int32](300)},
					},
				},
			},
		}
		Expect(env.Client.Create(ctx, mhc)).To(Succeed())
		// The MHC must have seen both workers healthy before one turns sick.
		Eventually(ctx, func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mhc), mhc)).To(Succeed())
			g.Expect(mhc.Status.ExpectedMachines).To(HaveValue(BeEquivalentTo(workers)))
			g.Expect(mhc.Status.CurrentHealthy).To(HaveValue(BeEquivalentTo(workers)))
		}).WithTimeout(provisionTimeout).WithPolling(alivePoll).Should(Succeed(), dump)

		machines, err := runningMachines(ctx, namespace, name)
		Expect(err).NotTo(HaveOccurred())
		var sick clusterv1.Machine
		for _, m := range machines {
			if m.Labels[clusterv1.MachineDeploymentNameLabel] == name+"-md-0" {
				sick = m
				break
			}
		}
		Expect(sick.Name).NotTo(BeEmpty(), "a worker machine")

		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"E2EUnhealthy","message":"set by the e2e suite","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`,
			metav1.Now().UTC().Format("2006-01-02T15:04:05Z"), metav1.Now().UTC().Format("2006-01-02T15:04:05Z"))
		_, err = kubectl(ctx, kubeconfig, "patch", "node", sick.Status.NodeRef.Name, "--subresource=status", "--type=strategic", "-p", patch)
		Expect(err).NotTo(HaveOccurred())
		out, err := kubectl(ctx, kubeconfig, "get", "node", sick.Status.NodeRef.Name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal("False"), "the workload API keeps the condition the patch set")

		Eventually(ctx, func() error {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(&sick), &clusterv1.Machine{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("the unhealthy Machine %s still exists", sick.Name)
		}).WithTimeout(aliveTimeout).WithPolling(alivePoll).Should(Succeed(), dump)

		machines = expectAlive(ctx, namespace, name, 3, workers, kubernetesVersion, dump)
		for _, m := range machines {
			Expect(m.Name).NotTo(Equal(sick.Name))
		}
		Eventually(ctx, func(g Gomega) {
			ready, all, err := readyNodes(ctx, kubeconfig)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(all).To(HaveLen(3+workers), "the unhealthy machine's Node is gone, its replacement's is there")
			g.Expect(all).NotTo(ContainElement(sick.Status.NodeRef.Name))
			g.Expect(ready).To(ConsistOf(all))
		}).WithTimeout(provisionTimeout).WithPolling(alivePoll).Should(Succeed(), dump)
		Expect(env.Client.Delete(ctx, mhc)).To(Succeed())
	})

	It("should scale KCP 3→5→3 with etcd following the machines", func(ctx SpecContext) {
		for _, replicas := range []int32{5, 3} {
			scaleKCP(ctx, namespace, name+"-control-plane", replicas)
			expectAlive(ctx, namespace, name, int(replicas), workers, kubernetesVersion, dump)
			Eventually(ctx, func(g Gomega) {
				out, err := kubectl(ctx, kubeconfig, "get", "pods", "-n", "kube-system", "-l", "component=etcd", "--no-headers", "-o", "custom-columns=NAME:.metadata.name")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(strings.Fields(out)).To(HaveLen(int(replicas)), "one etcd static Pod per control plane machine")
			}).WithTimeout(provisionTimeout).WithPolling(alivePoll).Should(Succeed(), dump)
		}
	})

	// dev runs core with InPlaceUpdates and registers our runtime
	// extension, whose CanUpdateMachine covers version changes of inmemory
	// machines. With no surge (KCP maxSurge 0; the MachineDeployment
	// maxSurge 0, maxUnavailable 1) KCP and the MachineDeployment upgrade
	// every Machine in place: the same Machines, their Nodes and static
	// Pods at the new version, and UpdateMachine reports each done only
	// once its Node runs the new kubelet.
	It("should upgrade KCP and the MachineDeployment to the next Kubernetes minor, every Machine in place", func(ctx SpecContext) {
		before, err := runningMachines(ctx, namespace, name)
		Expect(err).NotTo(HaveOccurred())
		kcp := &controlplanev1.KubeadmControlPlane{}
		Expect(kubeadmClient().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-control-plane"}, kcp)).To(Succeed())
		base := kcp.DeepCopy()
		kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
		kcp.Spec.Version = upgradeVersion
		Expect(kubeadmClient().Patch(ctx, kcp, client.MergeFrom(base))).To(Succeed())
		expectRolled(ctx, namespace, name, 3, workers, func(m clusterv1.Machine) bool {
			_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
			return !cp || m.Spec.Version == upgradeVersion
		}, dump)

		md := &clusterv1.MachineDeployment{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-md-0"}, md)).To(Succeed())
		mdBase := md.DeepCopy()
		md.Spec.Rollout.Strategy.Type = clusterv1.RollingUpdateMachineDeploymentStrategyType
		md.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
		md.Spec.Rollout.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		md.Spec.Template.Spec.Version = upgradeVersion
		Expect(env.Client.Patch(ctx, md, client.MergeFrom(mdBase))).To(Succeed())
		expectRolled(ctx, namespace, name, 3, workers, func(m clusterv1.Machine) bool { return m.Spec.Version == upgradeVersion }, dump)

		Eventually(ctx, func(g Gomega) {
			out, err := kubectl(ctx, kubeconfig, "get", "nodes", "--no-headers", "-o", "custom-columns=VERSION:.status.nodeInfo.kubeletVersion")
			g.Expect(err).NotTo(HaveOccurred())
			versions := strings.Fields(out)
			g.Expect(versions).To(HaveLen(3 + workers))
			g.Expect(versions).To(HaveEach(upgradeVersion))
		}).WithTimeout(provisionTimeout).WithPolling(alivePoll).Should(Succeed(), dump)
		out, err := kubectl(ctx, kubeconfig, "version", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring(`"gitVersion": "`+upgradeVersion+`"`), "the workload API server reports the upgraded version")

		after, err := runningMachines(ctx, namespace, name)
		Expect(err).NotTo(HaveOccurred())
		for _, controlPlane := range []bool{true, false} {
			Expect(machineNames(after, controlPlane)).To(Equal(machineNames(before, controlPlane)),
				"every Machine (control plane: %t) was upgraded in place", controlPlane)
		}
		out, err = kubectl(ctx, kubeconfig, "get", "pods", "-n", "kube-system", "-l", "tier=control-plane",
			"-o", "jsonpath={range .items[*]}{.spec.containers[0].image}{'\\n'}{end}")
		Expect(err).NotTo(HaveOccurred())
		images := strings.Fields(out)
		Expect(images).To(HaveLen(3*4), "kube-apiserver, kube-controller-manager, kube-scheduler and etcd on each control plane Node")
		for _, image := range images {
			if !strings.Contains(image, "/etcd:") {
				Expect(image).To(HaveSuffix(":"+upgradeVersion), "the static Pods run the new version")
			}
		}
	})

	It("should delete the cluster and free its workload API listener", func(ctx SpecContext) {
		cluster := &clusterv1.Cluster{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
		endpoint := net.JoinHostPort(cluster.Spec.ControlPlaneEndpoint.Host, strconv.Itoa(int(cluster.Spec.ControlPlaneEndpoint.Port)))
		_, err := kubectl(ctx, kubeconfig, "get", "nodes")
		Expect(err).NotTo(HaveOccurred(), "the workload API answers before the deletion")

		deleteClusterAndWait(ctx, namespace, name)
		Eventually(ctx, func() error { return dialFails(endpoint) }).WithTimeout(deleteTimeout).WithPolling(alivePoll).Should(Succeed(), dump)
	})
})

// expectAlive waits until the Cluster is Available, its KubeadmControlPlane
// Available with a healthy etcd and controlPlane ready replicas, and it has
// exactly controlPlane+workers Machines, all Running with a Node and of the
// version. It returns the Machines.
func expectAlive(ctx context.Context, namespace, name string, controlPlane, workers int, version string, dump func() string) []clusterv1.Machine {
	var machines []clusterv1.Machine
	Eventually(ctx, reporting(func(g Gomega) {
		var err error
		machines, err = runningMachines(ctx, namespace, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(machines).To(HaveLen(controlPlane + workers))
		cp := 0
		for _, m := range machines {
			g.Expect(m.Spec.Version).To(Equal(version), "Machine %s", m.Name)
			if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
				cp++
			}
		}
		g.Expect(cp).To(Equal(controlPlane), "control plane machines")
		expectAvailable(g, ctx, namespace, name, controlPlane)
	})).WithTimeout(aliveTimeout).WithPolling(alivePoll).Should(Succeed(), dump)
	return machines
}

// expectRolled waits as expectAlive does but with every Machine passing
// done (of the new version where it should be).
func expectRolled(ctx context.Context, namespace, name string, controlPlane, workers int, done func(clusterv1.Machine) bool, dump func() string) {
	Eventually(ctx, reporting(func(g Gomega) {
		machines, err := runningMachines(ctx, namespace, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(machines).To(HaveLen(controlPlane + workers))
		for _, m := range machines {
			g.Expect(done(m)).To(BeTrue(), "Machine %s (version %s) not rolled yet", m.Name, m.Spec.Version)
		}
		expectAvailable(g, ctx, namespace, name, controlPlane)
	})).WithTimeout(rolloutTimeout).WithPolling(alivePoll).Should(Succeed(), dump)
}

func expectAvailable(g Gomega, ctx context.Context, namespace, name string, controlPlane int) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	g.Expect(kubeadmClient().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-control-plane"}, kcp)).To(Succeed())
	g.Expect(kcp.Status.ReadyReplicas).To(HaveValue(BeEquivalentTo(controlPlane)), "KCP ready replicas")
	g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneAvailableCondition)).To(BeTrue(), "KCP Available")
	g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition)).To(BeTrue(), "KCP EtcdClusterHealthy")
	cluster := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cluster)).To(Succeed())
	g.Expect(conditions.IsTrue(cluster, clusterv1.AvailableCondition)).To(BeTrue(), "Cluster Available")
}

func scaleKCP(ctx context.Context, namespace, name string, replicas int32) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	Expect(kubeadmClient().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, kcp)).To(Succeed())
	base := kcp.DeepCopy()
	kcp.Spec.Replicas = &replicas
	Expect(kubeadmClient().Patch(ctx, kcp, client.MergeFrom(base))).To(Succeed())
}

// machineNames are the sorted names of the control plane's machines
// (controlPlane) or of the others.
func machineNames(machines []clusterv1.Machine, controlPlane bool) []string {
	var names []string
	for _, m := range machines {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp == controlPlane {
			names = append(names, m.Name)
		}
	}
	slices.Sort(names)
	return names
}
