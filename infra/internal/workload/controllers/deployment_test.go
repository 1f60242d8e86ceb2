package controllers

import (
	"net/netip"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

func deployment(name string, replicas int32, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, image),
		},
	}
}

// podCounter follows, through every change of the store, how many of an
// app's Pods exist and are ready at each moment.
type podCounter struct {
	mu       sync.Mutex
	exists   map[string]string // name → image
	ready    map[string]bool
	maxExist int
	minReady int
	counting bool
	// oldWhenNewCame is how many Pods of another image existed when the
	// first Pod of newImage was made.
	oldWhenNewCame int
	newImage       string
}

func countPods(e *env, app, newImage string) *podCounter {
	pc := &podCounter{exists: map[string]string{}, ready: map[string]bool{}, oldWhenNewCame: -1, newImage: newImage}
	stop := e.s.Observe(func(ch store.Change) {
		if ch.Resource != pods || ch.Object.GetLabels()["app"] != app {
			return
		}
		p, err := typed[corev1.Pod](ch.Object)
		if err != nil {
			return
		}
		pc.mu.Lock()
		defer pc.mu.Unlock()
		image := p.Spec.Containers[0].Image
		if ch.Type == watch.Deleted || !podActive(p) {
			delete(pc.exists, p.Name)
			delete(pc.ready, p.Name)
		} else {
			if ch.Type == watch.Added && image == pc.newImage && pc.oldWhenNewCame < 0 {
				pc.oldWhenNewCame = 0
				for _, img := range pc.exists {
					if img != pc.newImage {
						pc.oldWhenNewCame++
					}
				}
			}
			pc.exists[p.Name] = image
			if runningReady(p) {
				pc.ready[p.Name] = true
			} else {
				delete(pc.ready, p.Name)
			}
		}
		if pc.counting {
			pc.maxExist = max(pc.maxExist, len(pc.exists))
			pc.minReady = min(pc.minReady, len(pc.ready))
		}
	})
	e.t.Cleanup(stop)
	return pc
}

// start counts from now on.
func (pc *podCounter) start() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.counting = true
	pc.maxExist, pc.minReady = len(pc.exists), len(pc.ready)
}

func (pc *podCounter) get() (maxExist, minReady, oldWhenNewCame int) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.maxExist, pc.minReady, pc.oldWhenNewCame
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// rolledOut is what `kubectl rollout status` and `kubectl wait
// --for=condition=Available` wait for.
func rolledOut(d *appsv1.Deployment) bool {
	r := ptr.Deref(d.Spec.Replicas, 1)
	av, pr := deploymentCondition(d, appsv1.DeploymentAvailable), deploymentCondition(d, appsv1.DeploymentProgressing)
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == r && d.Status.Replicas == r &&
		d.Status.AvailableReplicas == r && d.Status.ReadyReplicas == r &&
		av != nil && av.Status == corev1.ConditionTrue && av.Reason == "MinimumReplicasAvailable" &&
		pr != nil && pr.Status == corev1.ConditionTrue && pr.Reason == "NewReplicaSetAvailable"
}

func TestDeploymentRollsOutWithinMaxSurgeAndMaxUnavailable(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1", "w2")
	d := deployment("web", 4, "nginx:1.27")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
	}}
	pc := countPods(e, "web", "nginx:1.28")
	created := e.create(deployments, d)

	e.g.Eventually(get[appsv1.Deployment](e, deployments, testNS, "web"), wait, interval).Should(Satisfy(rolledOut))
	rss, err := list[appsv1.ReplicaSet](e, replicaSets, testNS, map[string]string{"app": "web"})()
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(rss).To(HaveLen(1))
	rs1 := rss[0]
	e.g.Expect(rs1.Annotations).To(HaveKeyWithValue(revisionAnnotation, "1"))
	e.g.Expect(rs1.Name).To(Equal("web-" + rs1.Labels[podTemplateHashLabel]))
	ref := metav1.GetControllerOf(rs1)
	e.g.Expect(ref).NotTo(BeNil())
	e.g.Expect(ref.UID).To(Equal(created.GetUID()))
	e.g.Expect(ptr.Deref(ref.BlockOwnerDeletion, false)).To(BeTrue())

	// Every Pod runs on a Node, with an IP of that Node's pod CIDR.
	ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{"app": "web"})()
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(ps).To(HaveLen(4))
	for _, p := range ps {
		e.g.Expect(p.Labels).To(HaveKeyWithValue(podTemplateHashLabel, rs1.Labels[podTemplateHashLabel]))
		n, err := get[corev1.Node](e, nodes, "", p.Spec.NodeName)()
		e.g.Expect(err).NotTo(HaveOccurred())
		cidr := netip.MustParsePrefix(n.Spec.PodCIDR)
		e.g.Expect(netip.MustParsePrefix(podCIDR).Contains(cidr.Addr())).To(BeTrue())
		e.g.Expect(cidr.Contains(netip.MustParseAddr(p.Status.PodIP))).To(BeTrue(), "Pod %s IP %s in %s", p.Name, p.Status.PodIP, cidr)
		e.g.Expect(p.Status.HostIP).NotTo(BeEmpty())
		e.g.Expect(p.Status.StartTime).NotTo(BeNil())
		e.g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		cs := p.Status.ContainerStatuses[0]
		e.g.Expect(cs.Ready).To(BeTrue())
		e.g.Expect(cs.Image).To(Equal("nginx:1.27"))
		e.g.Expect(cs.ImageID).To(HavePrefix("nginx@sha256:"))
		e.g.Expect(cs.State.Running).NotTo(BeNil())
		for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			e.g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", ct), HaveField("Status", corev1.ConditionTrue))))
		}
	}

	pc.start()
	update(e, deployments, testNS, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28" })
	e.g.Eventually(func(g Gomega) {
		d, err := get[appsv1.Deployment](e, deployments, testNS, "web")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Generation).To(BeEquivalentTo(2))
		g.Expect(d).To(Satisfy(rolledOut))
		ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{"app": "web"})()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ps).To(HaveLen(4))
		for _, p := range ps {
			g.Expect(p.Spec.Containers[0].Image).To(Equal("nginx:1.28"))
		}
	}, wait, interval).Should(Succeed())
	maxExist, minReady, _ := pc.get()
	e.g.Expect(maxExist).To(BeNumerically("<=", 5), "maxSurge 1 over 4 replicas")
	e.g.Expect(minReady).To(BeNumerically(">=", 4), "maxUnavailable 0")

	rss, err = list[appsv1.ReplicaSet](e, replicaSets, testNS, map[string]string{"app": "web"})()
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(rss).To(HaveLen(2))
	for _, rs := range rss {
		if rs.Name == rs1.Name {
			e.g.Expect(*rs.Spec.Replicas).To(BeZero())
		} else {
			e.g.Expect(rs.Annotations).To(HaveKeyWithValue(revisionAnnotation, "2"))
			e.g.Expect(*rs.Spec.Replicas).To(BeEquivalentTo(4))
		}
	}

	// Back to the first template: its ReplicaSet becomes revision 3.
	update(e, deployments, testNS, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.27" })
	e.g.Eventually(func(g Gomega) {
		rs, err := get[appsv1.ReplicaSet](e, replicaSets, testNS, rs1.Name)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rs.Annotations).To(HaveKeyWithValue(revisionAnnotation, "3"))
		d, err := get[appsv1.Deployment](e, deployments, testNS, "web")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d).To(Satisfy(rolledOut))
	}, wait, interval).Should(Succeed())
}

func TestDeploymentRecreateRemovesOldPodsFirst(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1")
	d := deployment("db", 2, "postgres:16")
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	pc := countPods(e, "db", "postgres:17")
	e.create(deployments, d)
	e.g.Eventually(get[appsv1.Deployment](e, deployments, testNS, "db"), wait, interval).Should(Satisfy(rolledOut))

	update(e, deployments, testNS, "db", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "postgres:17" })
	e.g.Eventually(func(g Gomega) {
		d, err := get[appsv1.Deployment](e, deployments, testNS, "db")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Status.ObservedGeneration).To(BeEquivalentTo(2))
		g.Expect(d).To(Satisfy(rolledOut))
	}, wait, interval).Should(Succeed())
	_, _, oldWhenNewCame := pc.get()
	e.g.Expect(oldWhenNewCame).To(BeZero())
}

func TestDeploymentScalesAndReportsUnavailable(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1")
	e.create(deployments, deployment("app", 1, "busybox"))
	e.g.Eventually(get[appsv1.Deployment](e, deployments, testNS, "app"), wait, interval).Should(Satisfy(rolledOut))

	update(e, deployments, testNS, "app", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) })
	e.g.Eventually(get[appsv1.Deployment](e, deployments, testNS, "app"), wait, interval).Should(And(
		Satisfy(rolledOut), HaveField("Status.Replicas", BeEquivalentTo(3))))

	// Nothing fits: the new Pods stay Pending, the Deployment unavailable.
	update(e, deployments, testNS, "app", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	})
	e.g.Eventually(func(g Gomega) {
		d, err := get[appsv1.Deployment](e, deployments, testNS, "app")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Status.UnavailableReplicas).To(BeEquivalentTo(3))
		av := deploymentCondition(d, appsv1.DeploymentAvailable)
		g.Expect(av).NotTo(BeNil())
		g.Expect(av.Status).To(Equal(corev1.ConditionFalse))
		g.Expect(av.Reason).To(Equal("MinimumReplicasUnavailable"))
		ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{"app": "app"})()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ps).To(HaveLen(3))
		for _, p := range ps {
			g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodScheduled),
				HaveField("Status", corev1.ConditionFalse), HaveField("Reason", corev1.PodReasonUnschedulable),
				HaveField("Message", ContainSubstring("didn't match Pod's node affinity/selector")))))
		}
	}, wait, interval).Should(Succeed())

	// A Node that fits comes: they are scheduled there.
	e.node("ssd", false, map[string]string{"disk": "ssd"}, &[]corev1.Taint{})
	e.g.Eventually(get[appsv1.Deployment](e, deployments, testNS, "app"), wait, interval).Should(Satisfy(rolledOut))
	ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{"app": "app"})()
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, p := range ps {
		e.g.Expect(p.Spec.NodeName).To(Equal("ssd"))
	}
}
