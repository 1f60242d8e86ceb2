package controllers

import (
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

func TestStatefulSetMakesOrderedPodsAndRollsThemHighestFirst(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1", "w2")
	var mu sync.Mutex
	var made []string
	stop := e.s.Observe(func(ch store.Change) {
		if ch.Resource == pods && ch.Type == watch.Added && ch.Object.GetLabels()["app"] == "web" {
			mu.Lock()
			made = append(made, ch.Object.GetName())
			mu.Unlock()
		}
	})
	defer stop()
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: testNS},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3), ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podTemplate("web", "nginx:1"),
		},
	}
	e.create(statefulSets, sts)
	done := func(g Gomega, image string) {
		s, err := get[appsv1.StatefulSet](e, statefulSets, testNS, "web")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.Replicas).To(BeEquivalentTo(3))
		g.Expect(s.Status.ReadyReplicas).To(BeEquivalentTo(3))
		g.Expect(s.Status.AvailableReplicas).To(BeEquivalentTo(3))
		g.Expect(s.Status.UpdatedReplicas).To(BeEquivalentTo(3))
		g.Expect(s.Status.CurrentReplicas).To(BeEquivalentTo(3))
		g.Expect(s.Status.UpdateRevision).To(HavePrefix("web-"))
		g.Expect(s.Status.CurrentRevision).To(Equal(s.Status.UpdateRevision))
		ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{"app": "web"})()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ps).To(HaveLen(3))
		for _, p := range ps {
			g.Expect(p.Spec.Containers[0].Image).To(Equal(image))
			g.Expect(p).To(Satisfy(runningReady))
			g.Expect(p.Labels).To(HaveKeyWithValue(revisionHashLabel, s.Status.UpdateRevision))
		}
	}
	e.g.Eventually(func(g Gomega) { done(g, "nginx:1") }, wait, interval).Should(Succeed())
	mu.Lock()
	e.g.Expect(made).To(Equal([]string{"web-0", "web-1", "web-2"}))
	made = nil
	mu.Unlock()

	update(e, statefulSets, testNS, "web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	e.g.Eventually(func(g Gomega) { done(g, "nginx:2") }, wait, interval).Should(Succeed())
	mu.Lock()
	e.g.Expect(made).To(Equal([]string{"web-2", "web-1", "web-0"}))
	mu.Unlock()

	update(e, statefulSets, testNS, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	e.g.Eventually(func(g Gomega) {
		ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{"app": "web"})()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ps).To(HaveLen(1))
		g.Expect(ps[0].Name).To(Equal("web-0"))
	}, wait, interval).Should(Succeed())
}

func TestStatefulSetClaimsAreMadeAndBound(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1")
	e.create(storageClasses, &storageClass{TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{defaultClassAnnotation: "true"}}, Provisioner: "rancher.io/local-path"})
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: testNS},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2), ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: podTemplate("db", "postgres"),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceMust("1Gi")}}},
			}},
		},
	}
	e.create(statefulSets, sts)
	e.g.Eventually(func(g Gomega) {
		for _, name := range []string{"data-db-0", "data-db-1"} {
			pvc, err := get[corev1.PersistentVolumeClaim](e, claims, testNS, name)()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
		}
		p, err := get[corev1.Pod](e, pods, testNS, "db-1")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "data-db-1")))
		g.Expect(p.Spec.Hostname).To(Equal("db-1"))
		g.Expect(p.Spec.Subdomain).To(Equal("db"))
	}, wait, interval).Should(Succeed())
}

func TestDaemonSetRunsOnEveryMatchingNode(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil) // tainted NoSchedule by kubeadm
	e.workers("w1", "w2")
	e.node("gpu", false, map[string]string{"gpu": "true"}, &[]corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}})
	e.node("arm", false, map[string]string{"kubernetes.io/arch": "arm64"}, &[]corev1.Taint{})

	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: testNS},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: podTemplate("agent", "agent:1"),
		},
	}
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}},
	}}}
	ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	e.create(daemonSets, ds)
	onNodes := func(g Gomega, image string) []string {
		ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{"app": "agent"})()
		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, p := range ps {
			g.Expect(p).To(Satisfy(runningReady))
			g.Expect(p.Spec.Containers[0].Image).To(Equal(image))
			names = append(names, p.Spec.NodeName)
		}
		slices.Sort(names)
		return names
	}
	status := func(g Gomega, n int32) {
		d, err := get[appsv1.DaemonSet](e, daemonSets, testNS, "agent")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.DesiredNumberScheduled).To(Equal(n))
		g.Expect(d.Status.CurrentNumberScheduled).To(Equal(n))
		g.Expect(d.Status.NumberReady).To(Equal(n))
		g.Expect(d.Status.NumberAvailable).To(Equal(n))
		g.Expect(d.Status.UpdatedNumberScheduled).To(Equal(n))
	}
	e.g.Eventually(func(g Gomega) {
		g.Expect(onNodes(g, "agent:1")).To(Equal([]string{"gpu", "w1", "w2"}))
		status(g, 3)
	}, wait, interval).Should(Succeed())

	update(e, daemonSets, testNS, "agent", func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.Containers[0].Image = "agent:2" })
	e.g.Eventually(func(g Gomega) {
		g.Expect(onNodes(g, "agent:2")).To(Equal([]string{"gpu", "w1", "w2"}))
		status(g, 3)
	}, wait, interval).Should(Succeed())

	// A new matching Node gets one; the kube-proxy DaemonSet kubeadm made
	// has exactly one Pod per Node.
	e.workers("w3")
	e.g.Eventually(func(g Gomega) {
		g.Expect(onNodes(g, "agent:2")).To(Equal([]string{"gpu", "w1", "w2", "w3"}))
		status(g, 4)
		proxies, err := list[corev1.Pod](e, pods, metav1.NamespaceSystem, map[string]string{"k8s-app": "kube-proxy"})()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(proxies).To(HaveLen(6))
		kp, err := get[appsv1.DaemonSet](e, daemonSets, metav1.NamespaceSystem, "kube-proxy")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kp.Status.DesiredNumberScheduled).To(BeEquivalentTo(6))
		g.Expect(kp.Status.NumberReady).To(BeEquivalentTo(6))
	}, wait, interval).Should(Succeed())
}

func jobComplete(j *batchv1.Job) bool { return jobConditionTrue(j, batchv1.JobComplete) }

func TestJobRunsItsCompletionsAndCompletes(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1")
	tmpl := podTemplate("batch", "busybox")
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	e.create(jobs, &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: testNS},
		Spec:       batchv1.JobSpec{Completions: ptr.To[int32](3), Parallelism: ptr.To[int32](2), Template: tmpl},
	})
	e.g.Eventually(get[batchv1.Job](e, jobs, testNS, "pi"), wait, interval).Should(And(
		Satisfy(jobComplete), HaveField("Status.Succeeded", BeEquivalentTo(3)), HaveField("Status.Active", BeZero()),
		HaveField("Status.CompletionTime", Not(BeNil())), HaveField("Status.StartTime", Not(BeNil()))))
	ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{batchv1.JobNameLabel: "pi"})()
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(ps).To(HaveLen(3))
	for _, p := range ps {
		e.g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
		e.g.Expect(p.Status.ContainerStatuses[0].State.Terminated).NotTo(BeNil())
		e.g.Expect(p.Status.ContainerStatuses[0].State.Terminated.Reason).To(Equal("Completed"))
	}

	tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	e.create(jobs, &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "indexed", Namespace: testNS},
		Spec: batchv1.JobSpec{Completions: ptr.To[int32](3), Parallelism: ptr.To[int32](3),
			CompletionMode: ptr.To(batchv1.IndexedCompletion), Template: tmpl},
	})
	e.g.Eventually(get[batchv1.Job](e, jobs, testNS, "indexed"), wait, interval).Should(And(
		Satisfy(jobComplete), HaveField("Status.CompletedIndexes", "0-2")))
}

func TestCronJobMakesJobsOnSchedule(t *testing.T) {
	// The controllers' clock runs ahead: the first minute is due at once.
	e := newEnv(t, Options{Now: func() time.Time { return time.Now().Add(90 * time.Second) }})
	e.node("cp", true, nil, nil)
	e.workers("w1")
	tmpl := podTemplate("tick", "busybox")
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	e.create(cronJobs, &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "tick", Namespace: testNS},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"cron": "tick"}},
			Spec:       batchv1.JobSpec{Template: tmpl},
		}},
	})
	e.g.Eventually(func(g Gomega) {
		js, err := list[batchv1.Job](e, jobs, testNS, map[string]string{"cron": "tick"})()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(js).NotTo(BeEmpty())
		j := js[0]
		g.Expect(j).To(Satisfy(jobComplete))
		g.Expect(j.Annotations).To(HaveKey(batchv1.CronJobScheduledTimestampAnnotation))
		cj, err := get[batchv1.CronJob](e, cronJobs, testNS, "tick")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cj.Status.LastScheduleTime).NotTo(BeNil())
		g.Expect(j.Name).To(Equal("tick-" + itoa(cj.Status.LastScheduleTime.Unix()/60)))
		g.Expect(cj.Status.LastSuccessfulTime).NotTo(BeNil())
		g.Expect(cj.Status.Active).To(BeEmpty())
	}, wait, interval).Should(Succeed())
}

func TestPodsOfADeletedNodeAreDeletedAndReplaced(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1", "w2")
	e.create(deployments, deployment("web", 4, "nginx"))
	e.g.Eventually(get[appsv1.Deployment](e, deployments, testNS, "web"), wait, interval).Should(Satisfy(rolledOut))
	_, _, err := e.s.Delete(nodes, "", "w1", store.Preconditions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Eventually(func(g Gomega) {
		ps, err := list[corev1.Pod](e, pods, "", nil)()
		g.Expect(err).NotTo(HaveOccurred())
		web := 0
		for _, p := range ps {
			g.Expect(p.Spec.NodeName).NotTo(Equal("w1"))
			if p.Labels["app"] == "web" {
				web++
				g.Expect(p.Spec.NodeName).To(Equal("w2"))
			}
		}
		g.Expect(web).To(Equal(4))
		d, err := get[appsv1.Deployment](e, deployments, testNS, "web")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d).To(Satisfy(rolledOut))
	}, wait, interval).Should(Succeed())
}

func TestStaticPodsAreLeftAsKubeadmMadeThem(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	before, _, err := e.s.List(pods, metav1.NamespaceSystem, store.ListOptions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	rvs := map[string]string{}
	for _, p := range before {
		if _, static := p.GetAnnotations()["kubernetes.io/config.mirror"]; static {
			rvs[p.GetName()] = p.GetResourceVersion()
		}
	}
	e.g.Expect(rvs).To(HaveLen(4))
	// CoreDNS runs (it tolerates the control-plane taint) and is Available.
	e.g.Eventually(get[appsv1.Deployment](e, deployments, metav1.NamespaceSystem, "coredns"), wait, interval).Should(And(
		Satisfy(rolledOut), HaveField("Status.ReadyReplicas", BeEquivalentTo(2))))
	for name, rv := range rvs {
		p, err := e.s.Get(pods, metav1.NamespaceSystem, name)
		e.g.Expect(err).NotTo(HaveOccurred())
		e.g.Expect(p.GetResourceVersion()).To(Equal(rv), "static Pod %s changed", name)
	}
}

func TestStoppedClusterGetsNoMoreWork(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1")
	e.c.Stop()
	e.create(deployments, deployment("late", 1, "nginx"))
	e.g.Consistently(func() ([]*appsv1.ReplicaSet, error) {
		return list[appsv1.ReplicaSet](e, replicaSets, testNS, map[string]string{"app": "late"})()
	}, 500*time.Millisecond, 50*time.Millisecond).Should(BeEmpty())
}

// A store that already holds work (as one restored after a restart) gets
// it done when its cluster is added.
func TestWorkAlreadyStoredIsDoneWhenTheClusterIsAdded(t *testing.T) {
	g := NewWithT(t)
	s := store.New(store.Options{})
	t.Cleanup(s.Close)
	pre := &env{t: t, g: g, s: s}
	pre.node("cp", true, nil, nil)
	pre.workers("w1")
	pre.create(deployments, deployment("early", 2, "nginx"))

	m := New(Options{})
	t.Cleanup(m.Shutdown)
	c := m.Add(t.Name(), s)
	t.Cleanup(c.Stop)
	e := &env{t: t, g: g, s: s, c: c}
	e.g.Eventually(get[appsv1.Deployment](e, deployments, testNS, "early"), wait, interval).Should(Satisfy(rolledOut))
	e.g.Eventually(func(g Gomega) {
		for _, n := range []string{"cp", "w1"} {
			node, err := get[corev1.Node](e, nodes, "", n)()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(node.Spec.PodCIDR).NotTo(BeEmpty())
		}
	}, wait, interval).Should(Succeed())
}

// A cordoned Node gets no new Pods; the Pods replacing those evicted from
// it go elsewhere.
func TestCordonedNodesGetNoNewPods(t *testing.T) {
	e := newEnv(t, Options{})
	e.node("cp", true, nil, nil)
	e.workers("w1", "w2")
	e.create(deployments, deployment("web", 4, "nginx"))
	e.g.Eventually(get[appsv1.Deployment](e, deployments, testNS, "web"), wait, interval).Should(Satisfy(rolledOut))
	update(e, nodes, "", "w1", func(n *corev1.Node) { n.Spec.Unschedulable = true })
	ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{"app": "web"})()
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, p := range ps {
		if p.Spec.NodeName == "w1" {
			_, _, err := e.s.Delete(pods, p.Namespace, p.Name, store.Preconditions{})
			e.g.Expect(err).NotTo(HaveOccurred())
		}
	}
	e.g.Eventually(func(g Gomega) {
		ps, err := list[corev1.Pod](e, pods, testNS, map[string]string{"app": "web"})()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ps).To(HaveLen(4))
		for _, p := range ps {
			g.Expect(p.Spec.NodeName).To(Equal("w2"))
		}
		d, err := get[appsv1.Deployment](e, deployments, testNS, "web")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d).To(Satisfy(rolledOut))
	}, wait, interval).Should(Succeed())
}
