package controllers

import (
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"maps"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// daemonTolerations are what the DaemonSet controller adds to its Pods:
// they run on Nodes that are not ready, unreachable, under pressure or
// cordoned.
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

const templateGenerationLabel = "pod-template-generation"

// reconcileDaemonSet keeps one Pod on every Node the DaemonSet's Pods fit
// (nodeSelector, required node affinity, taints against its tolerations
// and the controller's own), and none elsewhere. Its Pods are bound at
// creation (the node affinity the controller sets names the Node, and
// nothing else could schedule them). A RollingUpdate replaces outdated
// Pods (their pod-template-generation is not the DaemonSet's generation
// and their images differ from the template's) as far as maxUnavailable
// allows; OnDelete leaves them.
func (c *Cluster) reconcileDaemonSet(namespace, name string) error {
	u, ds, err := liveObject[appsv1.DaemonSet](c, daemonSets, namespace, name)
	if u == nil || err != nil {
		return err
	}
	nodeObjs, _, err := c.store.List(nodes, "", store.ListOptions{})
	if err != nil {
		return err
	}
	objs, err := c.owned(pods, u, selectorOf(ds.Spec.Selector))
	if err != nil {
		return err
	}
	all, err := typedPods(objs)
	if err != nil {
		return err
	}
	byNode := map[string][]*corev1.Pod{}
	for _, p := range all {
		if podActive(p) {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	gen := strconv.FormatInt(ds.Generation, 10)
	updated := func(p *corev1.Pod) bool {
		return p.Labels[templateGenerationLabel] == gen || sameImages(p.Spec.Containers, ds.Spec.Template.Spec.Containers)
	}
	spec := ds.Spec.Template.Spec.DeepCopy()
	spec.Tolerations = append(spec.Tolerations, daemonTolerations...)
	maxUnavailable := 1
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		maxUnavailable, _ = intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, len(nodeObjs), true)
	}
	var st appsv1.DaemonSetStatus
	st.ObservedGeneration = ds.Generation
	var outdated []*corev1.Pod
	unavailable := 0
	for _, o := range nodeObjs {
		n, err := typed[corev1.Node](o)
		if err != nil {
			return err
		}
		have := byNode[n.Name]
		delete(byNode, n.Name)
		probe := &corev1.Pod{Spec: *spec}
		fits := matchesNode(spec, n) && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Effect != corev1.TaintEffectPreferNoSchedule && !tolerates(probe.Spec.Tolerations, t)
		})
		if !fits {
			st.NumberMisscheduled += int32(len(have))
			for _, p := range have {
				if err := c.deletePod(p); err != nil {
					return err
				}
			}
			continue
		}
		st.DesiredNumberScheduled++
		if len(have) == 0 {
			if err := c.createPod(daemonPod(u, ds, spec, n.Name, gen)); err != nil {
				return err
			}
			unavailable++
			continue
		}
		// One per Node: the oldest stays.
		slices.SortFunc(have, func(a, b *corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		for _, extra := range have[1:] {
			if err := c.deletePod(extra); err != nil {
				return err
			}
		}
		p := have[0]
		st.CurrentNumberScheduled++
		ready, _ := podReady(p)
		if ready {
			st.NumberReady++
			st.NumberAvailable++
		} else {
			unavailable++
		}
		if updated(p) {
			st.UpdatedNumberScheduled++
		} else if ready {
			outdated = append(outdated, p)
		}
	}
	for _, stray := range byNode {
		st.NumberMisscheduled += int32(len(stray))
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		for _, p := range outdated {
			if unavailable >= maxUnavailable {
				break
			}
			if err := c.deletePod(p); err != nil {
				return err
			}
			unavailable++
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	return c.setStatus(daemonSets, u, st)
}

func sameImages(have, want []corev1.Container) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range have {
		if have[i].Name != want[i].Name || have[i].Image != want[i].Image {
			return false
		}
	}
	return true
}

func daemonPod(u *unstructured.Unstructured, ds *appsv1.DaemonSet, spec *corev1.PodSpec, node, gen string) *corev1.Pod {
	tmpl := ds.Spec.Template.DeepCopy()
	tmpl.Spec = *spec.DeepCopy()
	tmpl.Labels = maps.Clone(tmpl.Labels)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[templateGenerationLabel] = gen
	tmpl.Labels[revisionHashLabel] = templateHash(&ds.Spec.Template, ds.Status.CollisionCount)
	// What the controller sets: a required affinity to the one Node.
	if tmpl.Spec.Affinity == nil {
		tmpl.Spec.Affinity = &corev1.Affinity{}
	}
	tmpl.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
		}}}},
	}}
	p := newPod(tmpl, ds.Namespace, u)
	p.Spec.NodeName = node
	return p
}
