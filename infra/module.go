// Package infra is the infra module of capi-monolith: the docker-like
// infrastructure provider, with MonolithCluster and MonolithMachine
// (Cluster API's InfraCluster and InfraMachine) provisioned by a docker or
// an inMemory backend.
package infra

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend/backendset"
	"github.com/capi-monolith/capi-monolith/infra/internal/reconcilers/cluster"
	"github.com/capi-monolith/capi-monolith/infra/internal/reconcilers/machine"
	"github.com/capi-monolith/capi-monolith/infra/internal/tasks"
	"github.com/capi-monolith/capi-monolith/infra/internal/webhooks"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/apiserver"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/secretjournal"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
	"github.com/capi-monolith/capi-monolith/infra/machines"
	"github.com/capi-monolith/capi-monolith/modules"
)

// Name is the value of --enable-modules that turns this module on.
const Name = "infra"

// Module is the infra module.
type Module struct {
	opts     Options
	machines *machines.Controller
}

var _ modules.Module = &Module{}

// New returns the infra module with opts.
func New(opts Options) *Module { return &Module{opts: opts, machines: machines.NewController()} }

// Machines is the module's one MonolithMachine controller, for the modules
// whose objects own MonolithMachines (machinepool): they register their
// owner adapter with it after this module is set up on their manager.
func (m *Module) Machines() *machines.Controller { return m.machines }

// Name implements modules.Module.
func (*Module) Name() string { return Name }

// AddToScheme implements modules.Module: our kinds, and Cluster API's IPAM
// types for the machines' address claims.
func (*Module) AddToScheme(scheme *runtime.Scheme) error {
	if err := ipamv1.AddToScheme(scheme); err != nil {
		return err
	}
	return v1alpha1.AddToScheme(scheme)
}

// SetupWithManager implements modules.Module. It builds the backends and
// the bootstrap task manager once for the manager, and binds the module's
// MonolithMachine controller (Machines) to the reconciler set up on it.
func (m *Module) SetupWithManager(ctx context.Context, shared modules.Shared) error {
	mgr, opts := shared.Manager, shared.Options
	dockerOpts := m.opts.docker()
	identity, err := managementClusterIdentity(ctx, mgr.GetAPIReader(), dockerOpts.ManagementCluster)
	if err != nil {
		return err
	}
	dockerOpts.ManagementCluster = identity
	workload, err := m.workloadHosting(mgr, opts.WatchFilterValue)
	if err != nil {
		return err
	}
	backends := backendset.New(ctx, backendset.Options{Docker: dockerOpts, Workload: workload})
	bootstraps := tasks.New(context.Background())
	if err := mgr.Add(bootstraps); err != nil {
		return fmt.Errorf("failed to add the bootstrap task manager: %w", err)
	}
	if opts.WebhooksEnabled {
		if err := webhooks.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("failed to set up the infra webhooks: %w", err)
		}
	}
	options := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	if err := (&cluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Backends: backends, WatchFilterValue: opts.WatchFilterValue}).
		SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the MonolithCluster controller: %w", err)
	}
	r := &machine.Reconciler{Client: mgr.GetClient(), Backends: backends, Tasks: bootstraps, WatchFilterValue: opts.WatchFilterValue}
	if err := r.SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the MonolithMachine controller: %w", err)
	}
	m.machines.Bind(mgr, r)
	return nil
}

// The workload state's Secrets (--inmemory-workload-state=secrets).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;create;update;delete

// workloadHosting builds what serves the inMemory clusters' workload API,
// one listener per cluster, closed when the manager stops.
func (m *Module) workloadHosting(mgr ctrl.Manager, watchFilter string) (*hosting.Hosting, error) {
	if err := m.opts.Validate(); err != nil {
		return nil, err
	}
	// The management cluster's kube-apiserver serves the same built-in
	// kinds: its OpenAPI, filtered to what the workload API serves, is the
	// workload API's.
	openAPI, err := apiserver.NewKubeAPIServerOpenAPI(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("failed to set up the inMemory workload API's OpenAPI source: %w", err)
	}
	journals, err := m.workloadJournals(mgr)
	if err != nil {
		return nil, err
	}
	leadership, err := m.workloadLeadership(mgr)
	if err != nil {
		return nil, err
	}
	h, err := hosting.New(hosting.Options{
		Address:       m.opts.InMemoryWorkloadAddress,
		AdvertiseHost: m.opts.InMemoryWorkloadAdvertiseHost,
		Ports:         m.opts.InMemoryWorkloadPorts,
		StateDir:      m.opts.InMemoryWorkloadStateDir,
		Limits:        m.opts.InMemoryWorkloadLimits,
		Secrets:       mgr.GetAPIReader(),
		Endpoints: func(ctx context.Context) ([]clusterv1.APIEndpoint, error) {
			list := &v1alpha1.MonolithClusterList{}
			if err := mgr.GetClient().List(ctx, list); err != nil {
				return nil, err
			}
			endpoints := make([]clusterv1.APIEndpoint, 0, len(list.Items))
			for _, mc := range list.Items {
				endpoints = append(endpoints, mc.Spec.ControlPlaneEndpoint)
			}
			return endpoints, nil
		},
		Own: func(ctx context.Context) ([]hosting.Recorded, error) {
			list := &v1alpha1.MonolithClusterList{}
			if err := mgr.GetClient().List(ctx, list); err != nil {
				return nil, err
			}
			own := make([]hosting.Recorded, 0, len(list.Items))
			for i := range list.Items {
				mc := &list.Items[i]
				if mc.Spec.Backend.InMemory == nil || !mc.DeletionTimestamp.IsZero() ||
					(watchFilter != "" && mc.Labels[clusterv1.WatchLabel] != watchFilter) {
					continue
				}
				if name := clusterNameOf(mc); name != "" {
					own = append(own, hosting.Recorded{
						Cluster:  types.NamespacedName{Namespace: mc.Namespace, Name: name},
						Endpoint: mc.Spec.ControlPlaneEndpoint,
					})
				}
			}
			return own, nil
		},
		FirstRecorder: func(ctx context.Context, endpoint clusterv1.APIEndpoint) (types.NamespacedName, bool, error) {
			list := &v1alpha1.MonolithClusterList{}
			if err := mgr.GetClient().List(ctx, list); err != nil {
				return types.NamespacedName{}, false, fmt.Errorf("failed to list MonolithClusters: %w", err)
			}
			first := firstRecorder(list.Items, endpoint)
			if first == nil {
				return types.NamespacedName{}, false, nil
			}
			return types.NamespacedName{Namespace: first.Namespace, Name: clusterNameOf(first)}, true, nil
		},
		Journals:   journals,
		Leadership: leadership,
		Handler:    apiserver.Options{OpenAPI: openAPI},
		Log:        mgr.GetLogger().WithName("workload-api"),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to set up the inMemory workload API: %w", err)
	}
	if err := mgr.Add(h); err != nil {
		return nil, fmt.Errorf("failed to add the inMemory workload API: %w", err)
	}
	return h, nil
}

// workloadJournals keeps the workload clusters' objects as
// --inmemory-workload-state says: nil leaves it to hosting's StateDir.
func (m *Module) workloadJournals(mgr ctrl.Manager) (hosting.Journals, error) {
	if m.opts.InMemoryWorkloadState != StateSecrets {
		return nil, nil
	}
	// Reads of the state must not come from a cache, and Secrets are not
	// cached by the manager.
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("failed to build the client of the workload state: %w", err)
	}
	return secretJournals{client: c, owners: mgr.GetClient(), log: mgr.GetLogger().WithName("workload-state")}, nil
}

// workloadLeadership shares the endpoints among replicas when
// --inmemory-workload-leader-lease names the Lease the leader publishes
// its address in.
func (m *Module) workloadLeadership(mgr ctrl.Manager) (*hosting.Leadership, error) {
	if m.opts.InMemoryWorkloadLeaderLease == "" {
		return nil, nil
	}
	namespace, name, err := m.opts.leaderLease()
	if err != nil {
		return nil, err
	}
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("failed to build the client of the workload API's leader Lease: %w", err)
	}
	return leaderLease{client: c, key: types.NamespacedName{Namespace: namespace, Name: name}}.leadership(mgr.Elected(), m.opts.InMemoryWorkloadAddress.String()), nil
}

// secretJournals keeps each cluster in Secrets owned by its
// MonolithCluster.
type secretJournals struct {
	client client.Client
	// owners reads Clusters and MonolithClusters, from the manager's cache:
	// the owner's UID is all it needs, and a takeover loading every
	// cluster then costs the API server only the state's reads.
	owners client.Reader
	log    logr.Logger
}

// Open implements hosting.Journals.
func (s secretJournals) Open(ctx context.Context, cluster types.NamespacedName, resume bool) (hosting.Journal, []store.Restored, uint64, error) {
	mc, err := s.monolithClusterOf(ctx, cluster)
	if err != nil {
		return nil, nil, 0, err
	}
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MonolithCluster", Name: mc.Name, UID: mc.UID}
	j, restored, lastRV, err := secretjournal.Open(ctx, secretjournal.Options{
		Client: s.client, Cluster: cluster, Owner: owner, Resume: resume, Log: s.log.WithValues("cluster", cluster.String()),
	})
	if err != nil {
		return nil, nil, 0, err
	}
	return j, restored, lastRV, nil
}

// monolithClusterOf reads the MonolithCluster of cluster, which owns its
// state. The Cluster's infrastructure reference names it: two cached reads
// whatever the namespace holds, where a list per cluster would make a
// restart with every cluster to load quadratic. The namespace is listed
// only when the reference does not lead to it (not set yet, or moved).
func (s secretJournals) monolithClusterOf(ctx context.Context, cluster types.NamespacedName) (*v1alpha1.MonolithCluster, error) {
	owns := func(mc *v1alpha1.MonolithCluster) bool {
		return clusterNameOf(mc) == cluster.Name && mc.DeletionTimestamp.IsZero()
	}
	c := &clusterv1.Cluster{}
	if err := s.owners.Get(ctx, cluster, c); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("failed to read Cluster %s: %w", cluster, err)
	}
	if ref := c.Spec.InfrastructureRef; ref.Kind == "MonolithCluster" && ref.APIGroup == v1alpha1.GroupVersion.Group {
		mc := &v1alpha1.MonolithCluster{}
		err := s.owners.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: ref.Name}, mc)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("failed to read MonolithCluster %s/%s: %w", cluster.Namespace, ref.Name, err)
		}
		if err == nil && owns(mc) {
			return mc, nil
		}
	}
	list := &v1alpha1.MonolithClusterList{}
	if err := s.owners.List(ctx, list, client.InNamespace(cluster.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to list MonolithClusters: %w", err)
	}
	for i := range list.Items {
		if mc := &list.Items[i]; owns(mc) {
			return mc, nil
		}
	}
	return nil, fmt.Errorf("no MonolithCluster of cluster %s to own its state", cluster)
}

// firstRecorder returns the oldest MonolithCluster recording endpoint
// (namespace and name break a tie of creation times), nil when none does.
func firstRecorder(items []v1alpha1.MonolithCluster, endpoint clusterv1.APIEndpoint) *v1alpha1.MonolithCluster {
	var first *v1alpha1.MonolithCluster
	for i := range items {
		mc := &items[i]
		if mc.Spec.ControlPlaneEndpoint != endpoint {
			continue
		}
		if first == nil || mc.CreationTimestamp.Before(&first.CreationTimestamp) ||
			(mc.CreationTimestamp.Equal(&first.CreationTimestamp) && mc.Namespace+"/"+mc.Name < first.Namespace+"/"+first.Name) {
			first = mc
		}
	}
	return first
}

// clusterNameOf is the name of the MonolithCluster's Cluster: its owner,
// or its cluster-name label before core set the owner.
func clusterNameOf(mc *v1alpha1.MonolithCluster) string {
	for _, ref := range mc.OwnerReferences {
		if ref.Kind == "Cluster" && strings.HasPrefix(ref.APIVersion, clusterv1.GroupVersion.Group+"/") {
			return ref.Name
		}
	}
	return mc.Labels[clusterv1.ClusterNameLabel]
}

// KeepStateIn implements modules.StateKeeper: the inMemory clusters'
// workload objects are kept in dir, unless --inmemory-workload-state-dir
// names a folder.
func (m *Module) KeepStateIn(dir string) {
	if m.opts.InMemoryWorkloadStateDir == "" {
		m.opts.InMemoryWorkloadStateDir = dir
	}
}

var _ modules.StateKeeper = (*Module)(nil)
