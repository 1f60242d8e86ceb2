package controllers

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// schedule binds a Pod as kube-scheduler would: to a Ready, schedulable
// Node whose labels, affinity and taints it fits and that has room for a
// Pod, spreading Pods by choosing the Node with the fewest. A Pod that fits
// nowhere gets PodScheduled=False (Unschedulable) and is tried again when a
// Node changes. Pods naming another scheduler are left alone.
func (c *Cluster) schedule(u *unstructured.Unstructured, p *corev1.Pod) error {
	if p.Spec.SchedulerName != "" && p.Spec.SchedulerName != corev1.DefaultSchedulerName {
		return nil
	}
	nodeObjs, _, err := c.store.List(nodes, "", store.ListOptions{})
	if err != nil {
		return fmt.Errorf("failed to list Nodes: %w", err)
	}
	podObjs, _, err := c.store.List(pods, "", store.ListOptions{})
	if err != nil {
		return fmt.Errorf("failed to list Pods: %w", err)
	}
	perNode := map[string]int{}
	for _, o := range podObjs {
		if n, _, _ := unstructured.NestedString(o.Object, "spec", "nodeName"); n != "" {
			phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
			if phase != string(corev1.PodSucceeded) && phase != string(corev1.PodFailed) {
				perNode[n]++
			}
		}
	}
	best, bestCount := "", 0
	reasons := map[string]int{}
	for _, o := range nodeObjs {
		n, err := typed[corev1.Node](o)
		if err != nil {
			return err
		}
		if why := unfit(p, n); why != "" {
			reasons[why]++
			continue
		}
		if max, ok := n.Status.Allocatable[corev1.ResourcePods]; ok && int64(perNode[n.Name]) >= max.Value() {
			reasons["Too many pods"]++
			continue
		}
		if best == "" || perNode[n.Name] < bestCount {
			best, bestCount = n.Name, perNode[n.Name]
		}
	}
	now := metav1.NewTime(c.m.opts.Now().Truncate(1e9))
	if best == "" {
		msg := unschedulableMessage(len(nodeObjs), reasons)
		cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: now}
		st := p.Status.DeepCopy()
		st.Phase = corev1.PodPending
		setPodCondition(st, cond)
		return c.setStatus(pods, u, st)
	}
	bound := u.DeepCopy()
	_ = unstructured.SetNestedField(bound.Object, best, "spec", "nodeName")
	st := p.Status.DeepCopy()
	st.Phase = corev1.PodPending
	setPodCondition(st, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now})
	m, err := toUnstructured(st)
	if err != nil {
		return err
	}
	bound.Object["status"] = m.Object
	if _, err := c.store.Update(pods, bound); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("failed to bind Pod %s/%s to Node %s: %w", p.Namespace, p.Name, best, err)
	}
	return nil
}

// setPodCondition sets a condition, keeping its transition time when its
// status does not change.
func setPodCondition(st *corev1.PodStatus, cond corev1.PodCondition) {
	for i, have := range st.Conditions {
		if have.Type == cond.Type {
			if have.Status == cond.Status {
				cond.LastTransitionTime = have.LastTransitionTime
			}
			st.Conditions[i] = cond
			return
		}
	}
	st.Conditions = append(st.Conditions, cond)
}

func unschedulableMessage(total int, reasons map[string]int) string {
	parts := make([]string, 0, len(reasons))
	for why, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, why))
	}
	sort.Strings(parts)
	msg := fmt.Sprintf("0/%d nodes are available", total)
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, ", ")
	}
	return msg + "."
}

// unfit says why the Pod cannot run on the Node, "" when it can.
func unfit(p *corev1.Pod, n *corev1.Node) string {
	if !nodeReady(n) {
		return "node(s) were not ready"
	}
	if n.Spec.Unschedulable && !tolerates(p.Spec.Tolerations, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return "node(s) were unschedulable"
	}
	if !matchesNode(&p.Spec, n) {
		return "node(s) didn't match Pod's node affinity/selector"
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !tolerates(p.Spec.Tolerations, t) {
			return fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)
		}
	}
	return ""
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tolerates says whether a toleration of the list tolerates the taint.
func tolerates(tols []corev1.Toleration, t corev1.Taint) bool {
	return slices.ContainsFunc(tols, func(tol corev1.Toleration) bool {
		if tol.Effect != "" && tol.Effect != t.Effect {
			return false
		}
		if tol.Key != "" && tol.Key != t.Key {
			return false
		}
		switch tol.Operator {
		case corev1.TolerationOpExists:
			return true
		case corev1.TolerationOpEqual, "":
			return tol.Key != "" && tol.Value == t.Value
		}
		return false
	})
}

// matchesNode says whether the Pod's nodeSelector and required node
// affinity select the Node.
func matchesNode(s *corev1.PodSpec, n *corev1.Node) bool {
	if len(s.NodeSelector) > 0 && !labels.SelectorFromSet(s.NodeSelector).Matches(labels.Set(n.Labels)) {
		return false
	}
	if s.Affinity == nil || s.Affinity.NodeAffinity == nil || s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	// Terms are ORed; the expressions of a term ANDed.
	for _, term := range s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue // an empty term matches nothing
		}
		if matchesTerm(term, n) {
			return true
		}
	}
	return false
}

func matchesTerm(term corev1.NodeSelectorTerm, n *corev1.Node) bool {
	for _, r := range term.MatchExpressions {
		if !matchesRequirement(r, n.Labels) {
			return false
		}
	}
	for _, r := range term.MatchFields {
		if r.Key != "metadata.name" || !matchesRequirement(r, map[string]string{"metadata.name": n.Name}) {
			return false
		}
	}
	return true
}

func matchesRequirement(r corev1.NodeSelectorRequirement, lbls map[string]string) bool {
	v, has := lbls[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !has || !slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}
