// Package access tells the person running `capi-monolith dev` how to reach
// each workload cluster: once a Cluster's control plane is initialized, its
// endpoint and the kubectl command that uses its kubeconfig are printed,
// once per cluster (again if it is deleted and made anew).
package access

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Options configure Announce.
type Options struct {
	// Config reaches the apiserver holding the Clusters. Required.
	Config *rest.Config
	// Scheme knows Cluster API core's types. Required.
	Scheme *runtime.Scheme
	// Printf prints one announcement. Required.
	Printf func(format string, args ...any)
}

// Announce prints how to reach every Cluster, in every namespace, whose
// control plane is initialized, until ctx ends.
//
// It watches the Clusters rather than listing them on a timer: with hundreds
// of Clusters a periodic list is a steady cost for kube-apiserver and for
// this process (every Cluster decoded every time), where a watch costs one
// event per change. Its own small cache keeps only what a message needs, so
// it works whichever modules, namespace or watch filter the manager has.
func Announce(ctx context.Context, opts Options) error {
	if opts.Config == nil || opts.Scheme == nil || opts.Printf == nil {
		return errors.New("access: Config, Scheme and Printf are required")
	}
	clusters, err := cache.New(opts.Config, cache.Options{
		Scheme:           opts.Scheme,
		DefaultTransform: slim,
	})
	if err != nil {
		return fmt.Errorf("failed to create the Cluster cache: %w", err)
	}
	informer, err := clusters.GetInformer(ctx, &clusterv1.Cluster{})
	if err != nil {
		return fmt.Errorf("failed to watch Clusters: %w", err)
	}
	a := &announcer{printf: opts.Printf, announced: map[types.UID]bool{}}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.observe(obj) },
		UpdateFunc: func(_, obj any) { a.observe(obj) },
		DeleteFunc: a.forget,
	}); err != nil {
		return fmt.Errorf("failed to watch Clusters: %w", err)
	}
	if err := clusters.Start(ctx); err != nil {
		return fmt.Errorf("failed to watch Clusters: %w", err)
	}
	return nil
}

// announcer remembers which Clusters (by UID, so that a Cluster made anew
// under the same name is announced again) were announced.
type announcer struct {
	printf    func(format string, args ...any)
	mu        sync.Mutex
	announced map[types.UID]bool
}

func (a *announcer) observe(obj any) {
	c, ok := obj.(*clusterv1.Cluster)
	if !ok || !ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false) || !c.Spec.ControlPlaneEndpoint.IsValid() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.announced[c.UID] {
		return
	}
	a.announced[c.UID] = true
	a.printf("%s", Message(c))
}

func (a *announcer) forget(obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	c, ok := obj.(*clusterv1.Cluster)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.announced, c.UID)
}

// slim keeps of a Cluster what Message and the announcer read, so that the
// cache holds a few hundred bytes per Cluster rather than the whole object.
func slim(obj any) (any, error) {
	c, ok := obj.(*clusterv1.Cluster)
	if !ok {
		return obj, nil
	}
	return &clusterv1.Cluster{
		TypeMeta: c.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       c.Namespace,
			Name:            c.Name,
			UID:             c.UID,
			ResourceVersion: c.ResourceVersion,
		},
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: c.Spec.ControlPlaneEndpoint},
		Status: clusterv1.ClusterStatus{Initialization: clusterv1.ClusterInitializationStatus{
			ControlPlaneInitialized: c.Status.Initialization.ControlPlaneInitialized,
		}},
	}, nil
}

// Message is what is printed for a cluster whose control plane is up.
func Message(c *clusterv1.Cluster) string {
	endpoint := net.JoinHostPort(c.Spec.ControlPlaneEndpoint.Host, strconv.Itoa(int(c.Spec.ControlPlaneEndpoint.Port)))
	return fmt.Sprintf("Cluster %s/%s is up, its API server on https://%s:\n"+
		"  clusterctl get kubeconfig %s -n %s > %s.kubeconfig && kubectl --kubeconfig %s.kubeconfig get nodes\n",
		c.Namespace, c.Name, endpoint, c.Name, c.Namespace, c.Name, c.Name)
}
