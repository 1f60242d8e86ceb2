// Package access tells the person running `capi-monolith dev` how to reach
// each workload cluster: once a Cluster's control plane is initialized, its
// endpoint and the kubectl command that uses its kubeconfig are printed,
// once per cluster (again if it is deleted and made anew).
package access

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Options configure Announce.
type Options struct {
	// Client reads the Clusters. Required.
	Client client.Reader
	// Printf prints one announcement. Required.
	Printf func(format string, args ...any)
	// Interval between two looks at the Clusters. Default 2s.
	Interval time.Duration
}

// Announce prints how to reach every Cluster whose control plane is
// initialized, until ctx ends.
func Announce(ctx context.Context, opts Options) {
	if opts.Interval <= 0 {
		opts.Interval = 2 * time.Second
	}
	announced := map[types.UID]bool{}
	ticker := time.NewTicker(opts.Interval)
	defer ticker.Stop()
	for {
		list := &clusterv1.ClusterList{}
		if err := opts.Client.List(ctx, list); err == nil {
			seen := map[types.UID]bool{}
			for i := range list.Items {
				c := &list.Items[i]
				seen[c.UID] = true
				if announced[c.UID] || !ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false) || !c.Spec.ControlPlaneEndpoint.IsValid() {
					continue
				}
				announced[c.UID] = true
				opts.Printf("%s", Message(c))
			}
			for uid := range announced {
				if !seen[uid] {
					delete(announced, uid)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Message is what is printed for a cluster whose control plane is up.
func Message(c *clusterv1.Cluster) string {
	endpoint := net.JoinHostPort(c.Spec.ControlPlaneEndpoint.Host, strconv.Itoa(int(c.Spec.ControlPlaneEndpoint.Port)))
	return fmt.Sprintf("Cluster %s/%s is up, its API server on https://%s:\n"+
		"  clusterctl get kubeconfig %s -n %s > %s.kubeconfig && kubectl --kubeconfig %s.kubeconfig get nodes\n",
		c.Namespace, c.Name, endpoint, c.Name, c.Namespace, c.Name, c.Name)
}
