package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

func isGone(err error) bool { return apierrors.IsNotFound(err) }

// reconcilePod schedules an unbound Pod, and runs a bound one as its
// Node's kubelet would.
func (c *Cluster) reconcilePod(_ context.Context, namespace, name string) (time.Duration, error) {
	u, err := c.store.Get(pods, namespace, name)
	if isGone(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	p, err := typed[corev1.Pod](u)
	if err != nil {
		return 0, err
	}
	if u.GetDeletionTimestamp() != nil {
		return 0, c.terminatePod(u, p)
	}
	if p.Spec.NodeName == "" {
		return 0, c.schedule(u, p)
	}
	return 0, c.runPod(u, p)
}

// terminatePod is the kubelet ending a Pod deleted with a grace period:
// its containers exit at once (a kubelet whose containers stop before
// their grace period ends), its status says so, and the Pod is deleted
// with grace 0, as a kubelet finishes a graceful deletion.
func (c *Cluster) terminatePod(u *unstructured.Unstructured, p *corev1.Pod) error {
	if !terminating(u) {
		return nil
	}
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		now := metav1.NewTime(c.m.opts.Now().Truncate(time.Second))
		if err := c.setStatus(pods, u, completedStatus(p, now)); err != nil && !isGone(err) {
			return err
		}
	}
	_, _, err := c.store.Delete(pods, p.Namespace, p.Name, store.Preconditions{UID: p.UID}, store.GracePeriod(0))
	if err != nil && !isGone(err) {
		return fmt.Errorf("failed to delete Pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// terminating says whether a Pod is being deleted with a grace period
// running: its kubelet is to end it.
func terminating(u *unstructured.Unstructured) bool {
	g := u.GetDeletionGracePeriodSeconds()
	return u.GetDeletionTimestamp() != nil && g != nil && *g > 0
}

// kubeletHasWork says whether a bound Pod is still to be started, is a
// Job's Pod to be finished, or is to be terminated.
func kubeletHasWork(u *unstructured.Unstructured) bool {
	if u.GetDeletionTimestamp() != nil {
		n, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName")
		return n != "" && terminating(u)
	}
	if n, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName"); n == "" {
		return false
	}
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	switch phase {
	case "", string(corev1.PodPending):
		return true
	case string(corev1.PodRunning):
		return runsToCompletion(u)
	}
	return false
}

// runsToCompletion says whether the Pod is a Job's that may finish: its
// simulated containers exit 0 as soon as they run. Other Pods run forever.
func runsToCompletion(u *unstructured.Unstructured) bool {
	policy, _, _ := unstructured.NestedString(u.Object, "spec", "restartPolicy")
	if policy == string(corev1.RestartPolicyAlways) || policy == "" {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(u)
	return ref != nil && ref.Kind == "Job" && strings.HasPrefix(ref.APIVersion, "batch/")
}

// runPod is the kubelet: a Pending Pod gets its IPs and starts, Running
// and Ready; a Job's running Pod then completes (Succeeded). A Pod bound
// to a Node that does not exist is deleted, as the Pod garbage collector
// deletes orphaned Pods.
func (c *Cluster) runPod(u *unstructured.Unstructured, p *corev1.Pod) error {
	nodeObj, err := c.store.Get(nodes, "", p.Spec.NodeName)
	if isGone(err) {
		return c.deletePod(p)
	}
	if err != nil {
		return err
	}
	node, err := typed[corev1.Node](nodeObj)
	if err != nil {
		return err
	}
	now := metav1.NewTime(c.m.opts.Now().Truncate(time.Second))
	switch p.Status.Phase {
	case "", corev1.PodPending:
		return c.startPod(u, p, node, now)
	case corev1.PodRunning:
		if runsToCompletion(u) {
			return c.setStatus(pods, u, completedStatus(p, now))
		}
	}
	return nil
}

func (c *Cluster) startPod(u *unstructured.Unstructured, p *corev1.Pod, node *corev1.Node, now metav1.Time) error {
	hostIP := nodeIP(node)
	st := p.Status.DeepCopy()
	if p.Spec.HostNetwork {
		st.PodIP = hostIP
	} else if st.PodIP == "" {
		c.allocMu.Lock()
		defer c.allocMu.Unlock()
		ip, err := c.allocatePodIP(node)
		if errors.Is(err, errNoCIDR) {
			return c.waitForCIDR(node.Name, p)
		}
		if err != nil {
			return err
		}
		st.PodIP = ip
	}
	st.Phase = corev1.PodRunning
	st.HostIP = hostIP
	st.HostIPs = nil
	if hostIP != "" {
		st.HostIPs = []corev1.HostIP{{IP: hostIP}}
	}
	st.PodIPs = nil
	if st.PodIP != "" {
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.QOSClass = qosClass(&p.Spec)
	for _, t := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		setPodCondition(st, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	st.InitContainerStatuses = nil
	for _, ctr := range p.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, ImageID: imageID(ctr.Image), ContainerID: containerID(p, ctr.Name),
			Ready: true, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: containerID(p, ctr.Name)}},
		})
	}
	st.ContainerStatuses = nil
	for _, ctr := range p.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image, ImageID: imageID(ctr.Image), ContainerID: containerID(p, ctr.Name),
			Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return c.setStatus(pods, u, st)
}

// completedStatus is a finished Pod's: every container exited 0.
func completedStatus(p *corev1.Pod, now metav1.Time) *corev1.PodStatus {
	st := p.Status.DeepCopy()
	st.Phase = corev1.PodSucceeded
	for _, t := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.ContainersReady, corev1.PodReady} {
		cond := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, LastTransitionTime: now}
		if t != "PodReadyToStartContainers" {
			cond.Reason = "PodCompleted"
		}
		setPodCondition(st, cond)
	}
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		started := now
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.Ready, cs.Started = false, ptr.To(false)
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: now, ContainerID: cs.ContainerID,
		}}
	}
	return st
}

var errNoCIDR = errors.New("the Node has no pod CIDR yet")

// waitForCIDR parks the Pod until its Node gets a pod CIDR (the Node's
// change queues it again), rather than retrying with a growing backoff.
func (c *Cluster) waitForCIDR(node string, p *corev1.Pod) error {
	c.mu.Lock()
	if c.waitingForCIDR == nil {
		c.waitingForCIDR = map[string][]nsName{}
	}
	c.waitingForCIDR[node] = append(c.waitingForCIDR[node], nsName{p.Namespace, p.Name})
	c.mu.Unlock()
	// The CIDR may have come between the read and the parking.
	n, err := c.store.Get(nodes, "", node)
	if err == nil {
		if cidr, _, _ := unstructured.NestedString(n.Object, "spec", "podCIDR"); cidr != "" {
			c.enqueue(kindPod, p.Namespace, p.Name)
		}
	}
	c.enqueue(kindNode, "", node)
	return nil
}

// allocatePodIP picks an address of the Node's pod CIDR no Pod on it has;
// allocMu is held.
func (c *Cluster) allocatePodIP(node *corev1.Node) (string, error) {
	if node.Spec.PodCIDR == "" {
		// Node IPAM has not got to it yet: the Node's change brings the Pod back.
		return "", errNoCIDR
	}
	cidr, err := netip.ParsePrefix(node.Spec.PodCIDR)
	if err != nil {
		return "", fmt.Errorf("node %s has an invalid pod CIDR %q: %w", node.Name, node.Spec.PodCIDR, err)
	}
	bound, _, err := c.store.List(pods, "", store.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.Name)})
	if err != nil {
		return "", fmt.Errorf("failed to list the Pods of Node %s: %w", node.Name, err)
	}
	used := map[string]bool{}
	for _, o := range bound {
		if ip, _, _ := unstructured.NestedString(o.Object, "status", "podIP"); ip != "" {
			used[ip] = true
		}
	}
	// .0 is the network, .1 the node's bridge, the last the broadcast.
	for i := uint64(2); i < size(cidr)-1; i++ {
		a, ok := nthAddr(cidr.Masked(), i)
		if !ok {
			break
		}
		if !used[a.String()] {
			return a.String(), nil
		}
	}
	return "", fmt.Errorf("no free Pod IP left in %s on Node %s", cidr, node.Name)
}

// nodeIP is the Node's InternalIP (else its first address).
func nodeIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeHostName {
			return a.Address
		}
	}
	return ""
}

func imageID(image string) string {
	repo := image
	if i := strings.LastIndex(image, "@"); i >= 0 {
		return image
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo = image[:i]
	}
	h := sha256.Sum256([]byte(image))
	return repo + "@sha256:" + hex.EncodeToString(h[:])
}

func containerID(p *corev1.Pod, container string) string {
	h := sha256.Sum256([]byte(string(p.UID) + "/" + container))
	return "inmemory://" + hex.EncodeToString(h[:])
}

// qosClass is the Pod's quality of service class, from its containers'
// requests and limits.
func qosClass(s *corev1.PodSpec) corev1.PodQOSClass {
	any, guaranteed := false, true
	for _, c := range append(append([]corev1.Container(nil), s.InitContainers...), s.Containers...) {
		if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
			any = true
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			l, hasLimit := c.Resources.Limits[r]
			req, hasReq := c.Resources.Requests[r]
			if !hasLimit || (hasReq && req.Cmp(l) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}
