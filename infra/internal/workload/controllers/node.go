package controllers

import (
	"fmt"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Node pod CIDR sizes, kube-controller-manager's --node-cidr-mask-size defaults.
const (
	nodeMaskIPv4 = 24
	nodeMaskIPv6 = 64
)

// reconcileNode gives a Node a pod CIDR as kube-controller-manager's node
// IPAM does, and deletes the Pods of a Node that is gone as its Pod
// garbage collector does (Cluster API's drain and MachineHealthCheck see
// them go).
func (c *Cluster) reconcileNode(name string) (time.Duration, error) {
	u, err := c.store.Get(nodes, "", name)
	if isGone(err) {
		return 0, c.deletePodsOf(name)
	}
	if err != nil {
		return 0, err
	}
	if cidr, _, _ := unstructured.NestedString(u.Object, "spec", "podCIDR"); cidr != "" || u.GetDeletionTimestamp() != nil {
		return 0, nil
	}
	net, known := c.network()
	if wait := u.GetCreationTimestamp().Add(networkGrace).Sub(c.m.opts.Now()); !known && wait > 0 {
		// kubeadm registers the first Node before it uploads kubeadm-config,
		// whose arrival queues the Node again.
		return wait, nil
	}
	return 0, c.allocateNodeCIDR(u, net.pods)
}

// networkGrace is how long a Node waits for kubeadm-config to say the
// cluster's pod CIDR before it gets one of the default.
const networkGrace = 10 * time.Second

func (c *Cluster) allocateNodeCIDR(u *unstructured.Unstructured, cluster netip.Prefix) error {
	name := u.GetName()
	c.allocMu.Lock()
	defer c.allocMu.Unlock()
	all, _, err := c.store.List(nodes, "", store.ListOptions{})
	if err != nil {
		return fmt.Errorf("failed to list Nodes: %w", err)
	}
	used := map[string]bool{}
	for _, n := range all {
		cidrs, _, _ := unstructured.NestedStringSlice(n.Object, "spec", "podCIDRs")
		for _, s := range cidrs {
			used[s] = true
		}
		if s, _, _ := unstructured.NestedString(n.Object, "spec", "podCIDR"); s != "" {
			used[s] = true
		}
	}
	mask := nodeMaskIPv4
	if cluster.Addr().Is6() {
		mask = nodeMaskIPv6
	}
	if mask < cluster.Bits() {
		mask = cluster.Bits()
	}
	for i := uint64(0); ; i++ {
		sub, ok := subnet(cluster, mask, i)
		if !ok {
			return fmt.Errorf("no pod CIDR left in %s for Node %s", cluster, name)
		}
		if used[sub.String()] {
			continue
		}
		_ = unstructured.SetNestedField(u.Object, sub.String(), "spec", "podCIDR")
		_ = unstructured.SetNestedStringSlice(u.Object, []string{sub.String()}, "spec", "podCIDRs")
		if _, err := c.store.Update(nodes, u); err != nil {
			return fmt.Errorf("failed to set the pod CIDR of Node %s: %w", name, err)
		}
		return nil
	}
}

// deletePodsOf deletes the Pods bound to a Node that is gone.
func (c *Cluster) deletePodsOf(node string) error {
	bound, _, err := c.store.List(pods, "", store.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node)})
	if err != nil {
		return fmt.Errorf("failed to list the Pods of Node %s: %w", node, err)
	}
	for _, o := range bound {
		if err := c.deleteObject(pods, o); err != nil {
			return err
		}
	}
	return nil
}

// reconcileAllNodes queues every Node without a pod CIDR.
func (c *Cluster) reconcileAllNodes() error {
	all, _, err := c.store.List(nodes, "", store.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range all {
		if cidr, _, _ := unstructured.NestedString(n.Object, "spec", "podCIDR"); cidr == "" {
			c.enqueue(kindNode, "", n.GetName())
		}
	}
	return nil
}
