package clusters

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
)

// FleetOptions describe many clusters made at once.
type FleetOptions struct {
	// NamePrefix starts the names of the fleet's namespaces.
	NamePrefix         string
	Clusters           int
	MachinesPerCluster int
	// ClustersPerNamespace spreads the clusters over namespaces.
	ClustersPerNamespace int
	// Pool gives every namespace a pool (a /24 of 10.0.0.0/8 by namespace
	// index, at most 253 machines) and every machine a claim on it.
	Pool bool
	// Workers create the objects in parallel.
	Workers int
}

// Fleet is the created clusters.
type Fleet struct {
	Namespaces []string
	Clusters   []*Cluster
}

// CreateFleet makes opts.Clusters clusters with Create, in fresh namespaces.
func CreateFleet(ctx context.Context, c client.Client, opts FleetOptions) (*Fleet, error) {
	if opts.Pool && opts.ClustersPerNamespace*opts.MachinesPerCluster > 253 {
		return nil, fmt.Errorf("%d machines per namespace do not fit its /24 pool", opts.ClustersPerNamespace*opts.MachinesPerCluster)
	}
	f := &Fleet{Namespaces: make([]string, (opts.Clusters+opts.ClustersPerNamespace-1)/opts.ClustersPerNamespace),
		Clusters: make([]*Cluster, opts.Clusters)}
	for i := range f.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: opts.NamePrefix}}
		if err := c.Create(ctx, ns); err != nil {
			return nil, fmt.Errorf("failed to create a namespace: %w", err)
		}
		f.Namespaces[i] = ns.Name
		if opts.Pool {
			net := fmt.Sprintf("10.%d.%d", i/256, i%256)
			if err := CreatePool(ctx, c, ns.Name, net+".0/24", 24, net+".1"); err != nil {
				return nil, err
			}
		}
	}
	err := harness.ForEach(ctx, opts.Clusters, opts.Workers, func(ctx context.Context, i int) error {
		cl, err := Create(ctx, c, Options{Namespace: f.Namespaces[i/opts.ClustersPerNamespace], Name: fmt.Sprintf("c%d", i),
			Machines: opts.MachinesPerCluster, Pool: opts.Pool})
		f.Clusters[i] = cl
		return err
	})
	return f, err
}

// MonolithMachines returns, uncreated, every machine's MonolithMachine,
// cluster by cluster.
func (f *Fleet) MonolithMachines() []*infrav1.MonolithMachine {
	var out []*infrav1.MonolithMachine
	for _, cl := range f.Clusters {
		for i := range cl.Machines {
			out = append(out, cl.MonolithMachine(i))
		}
	}
	return out
}

// Objects is how many objects CreateFleet made.
func (f *Fleet) Objects() int {
	n := len(f.Namespaces)
	for _, cl := range f.Clusters {
		n += 4 + len(cl.Machines) // Cluster, MonolithCluster, 2 Secrets, Machines
	}
	if len(f.Clusters) > 0 && f.Clusters[0].Pool {
		n += len(f.Namespaces)
	}
	return n
}

// Delete removes the fleet. The infrastructure kinds carry the provider's
// finalizers, so the provider must still be running: their deletion is
// waited for (bounded by timeout) before the core objects, which no
// controller holds here, are deleted.
func (f *Fleet) Delete(ctx context.Context, c client.Client, timeout time.Duration) error {
	for _, ns := range f.Namespaces {
		for _, obj := range []client.Object{&infrav1.MonolithMachine{}, &infrav1.MonolithCluster{}} {
			if err := c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("failed to delete %T in %s: %w", obj, ns, err)
			}
		}
	}
	deadline := time.Now().Add(timeout)
	for _, ns := range f.Namespaces {
		for {
			mms, mcs := &infrav1.MonolithMachineList{}, &infrav1.MonolithClusterList{}
			if err := c.List(ctx, mms, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("failed to list MonolithMachines in %s: %w", ns, err)
			}
			if err := c.List(ctx, mcs, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("failed to list MonolithClusters in %s: %w", ns, err)
			}
			if len(mms.Items)+len(mcs.Items) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d MonolithMachines and %d MonolithClusters in %s still there %s after deletion", len(mms.Items), len(mcs.Items), ns, timeout)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
		for _, obj := range []client.Object{&clusterv1.Machine{}, &clusterv1.Cluster{}, &corev1.Secret{}} {
			if err := c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("failed to delete %T in %s: %w", obj, ns, err)
			}
		}
		// envtest runs no namespace controller, so the namespace would stay
		// Terminating; its objects are gone, which is what matters.
	}
	return nil
}

// IsProvisioned tells whether the infrastructure provider is done with a
// MonolithMachine: status.initialization.provisioned and Ready=True.
func IsProvisioned(mm *infrav1.MonolithMachine) bool {
	return ptr.Deref(mm.Status.Initialization.Provisioned, false) && meta.IsStatusConditionTrue(mm.Status.Conditions, clusterv1.ReadyCondition)
}

// WatchProvisioned calls seen, with the time and the key namespace/name,
// whenever a watch sees a MonolithMachine of namespaces provisioned (again
// for later events of the same object), until seen returns true, ctx ends
// or the watch fails.
func WatchProvisioned(ctx context.Context, c client.WithWatch, namespaces []string, seen func(key string, at time.Time) (done bool)) error {
	in := map[string]bool{}
	for _, ns := range namespaces {
		in[ns] = true
	}
	return harness.WatchEach(ctx, c, &infrav1.MonolithMachineList{}, func(_ watch.EventType, obj client.Object) (bool, error) {
		mm, ok := obj.(*infrav1.MonolithMachine)
		if !ok || !in[mm.Namespace] || !IsProvisioned(mm) {
			return false, nil
		}
		return seen(mm.Namespace+"/"+mm.Name, time.Now()), nil
	})
}
