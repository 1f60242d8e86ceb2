package pool

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/labels/format"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/machines"
	"github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
)

const (
	// fieldManager owns what the pool applies to its instances.
	fieldManager = "monolithmachinepool"
	// ProviderIDPrefix starts the pool's own provider ID.
	ProviderIDPrefix = "monolith-pool:///"
	// deletionRecheck is how often a pool being deleted looks at the
	// instances it still waits for (their deletions also trigger it).
	deletionRecheck = 5 * time.Second
	// cacheWait bounds the wait for the cache to see what the reconcile
	// wrote, so that the next reconcile does not act on it twice.
	cacheWait = 10 * time.Second
	// machineGrace is how long an instance to remove waits for Cluster
	// API to make its Machine before it is deleted without one.
	machineGrace = time.Minute
	// maxPoolPrefix keeps instance names (<pool>-<5 characters>) valid
	// host names and label values.
	maxPoolPrefix = 57
)

// ReconcileNormal scales and rolls the pool's instances towards the
// MachinePool's replicas and version. It records what it finds in
// s.Results; UpdateStatus derives the conditions and status fields from
// them.
func (r *Reconciler) ReconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	pool, found := s.Object, &s.Results
	found.reconciledNormal = true
	if pool.Spec.ProviderID == "" {
		pool.Spec.ProviderID = ProviderIDPrefix + pool.Namespace + "/" + pool.Name
	}
	mp, err := util.GetOwnerMachinePool(ctx, r.Client, pool.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("failed to get the owner MachinePool: %w", err)
	}
	if mp == nil {
		found.notReady = &notReady{reason: v1alpha1.WaitingForMachinePoolReason}
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("MachinePool", klog.KObj(mp))
	ctx = ctrl.LoggerInto(ctx, log)

	desired, capped := boundedReplicas(int(ptr.Deref(mp.Spec.Replicas, 1)))
	if capped {
		log.Info("MachinePool asks more replicas than a pool can hold: capped", "replicas", ptr.Deref(mp.Spec.Replicas, 1), "max", MaxInstances)
	}
	obs, err := r.observe(ctx, pool, mp)
	if err != nil {
		return ctrl.Result{}, err
	}
	hash, err := templateHash(pool.Spec.Template, mp.Spec.Template.Spec.Version)
	if err != nil {
		return ctrl.Result{}, err
	}
	members := obs.members(hash)
	found.observed, found.desired = obs, desired

	if problem, err := r.configurationProblem(ctx, pool, s.Cluster); err != nil || problem != "" {
		if problem != "" {
			// A condition only: contract v1beta2 has no failureReason, and
			// Cluster API v1.14.2 core panics on a MachinePool whose
			// infrastructure sets one.
			found.notReady = &notReady{reason: v1alpha1.InvalidConfigurationReason, message: problem}
			// Nothing helps but a spec change, which reconciles again.
			return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("invalid configuration: %s", problem))
		}
		return ctrl.Result{}, err
	}

	if mp.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		found.notReady = &notReady{reason: infrav1.WaitingForBootstrapDataReason}
		return ctrl.Result{}, nil
	}

	found.summary = &summary{instances: len(obs.instances), members: members, desired: desired}
	p := planRollout(desired, boundsOf(pool), members)
	var res ctrl.Result
	creates, more := createsNow(p.create)
	for range creates {
		if err := r.createInstance(ctx, pool, mp, s.Cluster, obs, hash); err != nil {
			return ctrl.Result{}, err
		}
	}
	if more {
		res.RequeueAfter = nextStepAfter
	}
	for _, name := range p.remove {
		wait, err := r.removeInstance(ctx, obs, name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
			res.RequeueAfter = wait
		}
	}
	return res, nil
}

// observation is what the pool has: its instances and their Machines.
type observation struct {
	// instances are the MonolithMachines the pool owns, sorted by name.
	instances []infrav1.MonolithMachine
	// machines are the instances' Machines, by instance name.
	machines map[string]*clusterv1.Machine
}

func (r *Reconciler) observe(ctx context.Context, pool *v1alpha1.MonolithMachinePool, mp *clusterv1.MachinePool) (*observation, error) {
	instances, err := r.instancesOf(ctx, pool)
	if err != nil {
		return nil, err
	}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, client.InNamespace(pool.Namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel:     mp.Spec.ClusterName,
		clusterv1.MachinePoolNameLabel: format.MustFormatValue(mp.Name),
	}); err != nil {
		return nil, fmt.Errorf("failed to list the MachinePool's Machines: %w", err)
	}
	obs := &observation{instances: instances, machines: map[string]*clusterv1.Machine{}}
	for i := range machines.Items {
		m := &machines.Items[i]
		if ref := m.Spec.InfrastructureRef; ref.Kind == v1alpha1.InfrastructureMachineKind && ref.APIGroup == infrav1.GroupVersion.Group {
			obs.machines[ref.Name] = m
		}
	}
	return obs, nil
}

// instancesOf lists the MonolithMachines the pool owns, sorted by name.
func (r *Reconciler) instancesOf(ctx context.Context, pool *v1alpha1.MonolithMachinePool) ([]infrav1.MonolithMachine, error) {
	list := &infrav1.MonolithMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(pool.Namespace), client.HasLabels{clusterv1.MachinePoolNameLabel}); err != nil {
		return nil, fmt.Errorf("failed to list the pool's instances: %w", err)
	}
	var out []infrav1.MonolithMachine
	for _, mm := range list.Items {
		for _, ref := range mm.OwnerReferences {
			if ref.UID == pool.UID {
				out = append(out, mm)
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b infrav1.MonolithMachine) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// members are the instances that are not going away, as the rollout plan
// sees them.
func (o *observation) members(hash string) []member {
	var members []member
	for i := range o.instances {
		mm := &o.instances[i]
		m := o.machines[mm.Name]
		if o.deleting(mm) {
			continue
		}
		_, requested := mm.Annotations[clusterv1.DeleteMachineAnnotation]
		if m != nil {
			if _, ok := m.Annotations[clusterv1.DeleteMachineAnnotation]; ok {
				requested = true
			}
		}
		members = append(members, member{
			name:            mm.Name,
			created:         mm.CreationTimestamp.Time,
			deleteRequested: requested,
			outdated:        mm.Annotations[v1alpha1.TemplateHashAnnotation] != hash,
			ready:           instanceReady(mm),
		})
	}
	return members
}

// deleting tells whether the instance or its Machine is being deleted.
func (o *observation) deleting(mm *infrav1.MonolithMachine) bool {
	if !mm.DeletionTimestamp.IsZero() {
		return true
	}
	m := o.machines[mm.Name]
	return m != nil && !m.DeletionTimestamp.IsZero()
}

// instanceReady: the node exists and its bootstrap data ran (the status
// fields the machine controller keeps, not the conditions derived from
// them).
func instanceReady(mm *infrav1.MonolithMachine) bool {
	return ptr.Deref(mm.Status.Initialization.Provisioned, false) && ptr.Deref(mm.Status.Bootstrap.Succeeded, false)
}

func boundsOf(pool *v1alpha1.MonolithMachinePool) bounds {
	b := bounds{
		maxSurge:       int(ptr.Deref(pool.Spec.Strategy.MaxSurge, v1alpha1.DefaultMaxSurge)),
		maxUnavailable: int(ptr.Deref(pool.Spec.Strategy.MaxUnavailable, v1alpha1.DefaultMaxUnavailable)),
	}
	// The webhook refuses both at zero; without it, keep the pool moving.
	if b.maxSurge <= 0 && b.maxUnavailable <= 0 {
		b.maxSurge = 1
	}
	return b
}

// templateHash identifies what instances are made from: the pool's
// instance template and the MachinePool's Kubernetes version.
func templateHash(t v1alpha1.InstanceTemplate, version string) (string, error) {
	raw, err := json.Marshal(struct {
		Template v1alpha1.InstanceTemplate `json:"template"`
		Version  string                    `json:"version"`
	}{t, version})
	if err != nil {
		return "", fmt.Errorf("failed to hash the instance template: %w", err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8]), nil
}

// configurationProblem reports, as a terminal failure message, a pool
// whose backend its cluster does not use; "" when there is none or the
// cluster cannot be read yet.
func (r *Reconciler) configurationProblem(ctx context.Context, pool *v1alpha1.MonolithMachinePool, cluster *clusterv1.Cluster) (string, error) {
	mc, err := machines.MonolithClusterOf(ctx, r.Client, cluster)
	switch {
	case errors.Is(err, machines.ErrNotMonolithCluster):
		ref := cluster.Spec.InfrastructureRef
		return fmt.Sprintf("Cluster %s has a %s.%s as its infrastructure, not a MonolithCluster", cluster.Name, ref.Kind, ref.APIGroup), nil
	case err != nil || mc == nil:
		return "", err
	}
	poolKind, clusterKind := backendKind(pool.Spec.Template.Backend.Docker != nil), backendKind(mc.Spec.Backend.Docker != nil)
	if poolKind != clusterKind {
		return fmt.Sprintf("spec.template.backend is %s but MonolithCluster %s uses %s: a pool's backend must be its cluster's",
			poolKind, mc.Name, clusterKind), nil
	}
	return "", nil
}

func backendKind(docker bool) string {
	if docker {
		return "docker"
	}
	return "inMemory"
}

// createInstance server-side applies a new instance: a MonolithMachine
// labelled for Cluster API's MachinePool Machines (cluster and pool name),
// owned by the pool, recording the template hash and version it is made
// from. It returns once the cache sees it.
func (r *Reconciler) createInstance(ctx context.Context, pool *v1alpha1.MonolithMachinePool, mp *clusterv1.MachinePool,
	cluster *clusterv1.Cluster, obs *observation, hash string) error {
	prefix := pool.Name
	if len(prefix) > maxPoolPrefix {
		prefix = prefix[:maxPoolPrefix]
	}
	mm := &infrav1.MonolithMachine{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: v1alpha1.InfrastructureMachineKind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pool.Namespace,
			Name:      prefix + "-" + utilrand.String(5),
			Labels: map[string]string{
				clusterv1.ClusterNameLabel:     cluster.Name,
				clusterv1.MachinePoolNameLabel: format.MustFormatValue(mp.Name),
			},
			Annotations: map[string]string{
				v1alpha1.TemplateHashAnnotation: hash,
				v1alpha1.VersionAnnotation:      mp.Spec.Template.Spec.Version,
			},
			// Not as controller: Cluster API makes the instance's Machine
			// its controller.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "MonolithMachinePool", Name: pool.Name, UID: pool.UID,
			}},
		},
		Spec: infrav1.MonolithMachineSpec{
			Backend:            *pool.Spec.Template.Backend.DeepCopy(),
			AddressesFromPools: slices.Clone(pool.Spec.Template.AddressesFromPools),
			FailureDomain:      obs.leastUsedFailureDomain(mp.Spec.FailureDomains),
		},
	}
	// The instance must pass the same --watch-filter as its pool.
	if v, ok := pool.Labels[clusterv1.WatchLabel]; ok {
		mm.Labels[clusterv1.WatchLabel] = v
	}
	if slices.ContainsFunc(obs.instances, func(i infrav1.MonolithMachine) bool { return i.Name == mm.Name }) {
		return fmt.Errorf("generated instance name %s is taken, retrying", mm.Name)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mm)
	if err != nil {
		return fmt.Errorf("failed to convert instance %s: %w", mm.Name, err)
	}
	delete(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	ctrl.LoggerFrom(ctx).Info("Creating an instance", "MonolithMachine", klog.KObj(mm))
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}),
		client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply instance %s: %w", mm.Name, err)
	}
	obs.instances = append(obs.instances, *mm)
	return r.waitForCache(ctx, func(ctx context.Context) (bool, error) {
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(mm), &infrav1.MonolithMachine{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// leastUsedFailureDomain spreads instances over the MachinePool's failure
// domains: the first of those with the fewest instances.
func (o *observation) leastUsedFailureDomain(domains []string) string {
	if len(domains) == 0 {
		return ""
	}
	used := map[string]int{}
	for i := range o.instances {
		if !o.deleting(&o.instances[i]) {
			used[o.instances[i].Spec.FailureDomain]++
		}
	}
	best := domains[0]
	for _, d := range domains[1:] {
		if used[d] < used[best] {
			best = d
		}
	}
	return best
}

// removeInstance deletes the instance's Machine, so that Cluster API
// drains its node and then deletes the instance. An instance Cluster API
// has not made a Machine for yet waits for it (deleting the instance
// alone would race with its Machine being made), for machineGrace at most:
// an instance still without a Machine then goes by itself (Cluster API is
// not making Machines, e.g. it cannot reach the workload cluster). It
// returns how long to wait before trying again.
func (r *Reconciler) removeInstance(ctx context.Context, obs *observation, name string) (time.Duration, error) {
	log := ctrl.LoggerFrom(ctx)
	m := obs.machines[name]
	if m == nil {
		i := slices.IndexFunc(obs.instances, func(mm infrav1.MonolithMachine) bool { return mm.Name == name })
		mm := &obs.instances[i]
		if wait := time.Until(mm.CreationTimestamp.Add(machineGrace)); wait > 0 {
			log.V(4).Info("Waiting for the instance's Machine before removing it", "MonolithMachine", klog.KObj(mm))
			return wait, nil
		}
		log.Info("Deleting an instance that has no Machine", "MonolithMachine", klog.KObj(mm))
		if err := r.Client.Delete(ctx, mm); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("failed to delete instance %s: %w", mm.Name, err)
		}
		return 0, r.waitForCache(ctx, func(ctx context.Context) (bool, error) {
			got := &infrav1.MonolithMachine{}
			err := r.Client.Get(ctx, client.ObjectKeyFromObject(mm), got)
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return err == nil && !got.DeletionTimestamp.IsZero(), err
		})
	}
	log.Info("Deleting the Machine of an instance", "Machine", klog.KObj(m))
	if err := r.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("failed to delete Machine %s: %w", m.Name, err)
	}
	return 0, r.waitForCache(ctx, func(ctx context.Context) (bool, error) {
		got := &clusterv1.Machine{}
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), got)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && !got.DeletionTimestamp.IsZero(), err
	})
}

func (r *Reconciler) waitForCache(ctx context.Context, done wait.ConditionWithContextFunc) error {
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, cacheWait, true, done); err != nil {
		return fmt.Errorf("failed to wait for the cache: %w", err)
	}
	return nil
}

// ReconcileDelete removes every instance (through its Machine when it has
// one) and lets the pool go once none is left.
func (r *Reconciler) ReconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	pool, res := s.Object, &s.Results
	instances, err := r.instancesOf(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	res.observed = &observation{instances: instances, machines: map[string]*clusterv1.Machine{}}
	if len(instances) == 0 {
		return ctrl.Result{}, nil
	}
	res.notReady = &notReady{reason: infrav1.DeletingReason, message: fmt.Sprintf("Deleting %d instances", len(instances))}
	for i := range instances {
		mm := &instances[i]
		if !mm.DeletionTimestamp.IsZero() {
			continue
		}
		m := &clusterv1.Machine{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Name}, m)
		switch {
		case err == nil && m.Spec.InfrastructureRef.Name == mm.Name:
			if m.DeletionTimestamp.IsZero() {
				ctrl.LoggerFrom(ctx).Info("Deleting the Machine of an instance", "Machine", klog.KObj(m))
				if err := r.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
					return ctrl.Result{}, fmt.Errorf("failed to delete Machine %s: %w", m.Name, err)
				}
			}
		case err == nil || apierrors.IsNotFound(err):
			// No Machine (Cluster API is not making them any more): the
			// instance goes by itself.
			ctrl.LoggerFrom(ctx).Info("Deleting an instance", "MonolithMachine", klog.KObj(mm))
			if err := r.Client.Delete(ctx, mm); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("failed to delete instance %s: %w", mm.Name, err)
			}
		default:
			return ctrl.Result{}, fmt.Errorf("failed to get Machine %s: %w", mm.Name, err)
		}
	}
	return ctrl.Result{RequeueAfter: deletionRecheck}, nil
}
