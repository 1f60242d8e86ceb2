package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// DefaultWorkers is how many reconciles run at once for all clusters.
const DefaultWorkers = 4

// Options configure a Manager; the zero value is usable.
type Options struct {
	// Workers bounds how many reconciles run at once, over every cluster.
	// Default DefaultWorkers.
	Workers int
	// Log receives reconcile errors.
	Log logr.Logger
	// Now is the clock of conditions, start times and schedules. Default time.Now.
	Now func() time.Time
}

// kind says which controller an item is for.
type kind uint8

const (
	kindPod  kind = iota // scheduler and kubelet
	kindNode             // node IPAM and the Pods of a deleted Node
	kindReplicaSet
	kindReplicationController
	kindDeployment
	kindStatefulSet
	kindDaemonSet
	kindJob
	kindCronJob
	kindService        // cluster IP, node ports, Endpoints and EndpointSlices
	kindServicesIn     // every Service of a namespace (a Pod in it changed)
	kindClaim          // PersistentVolumeClaim binding
	kindClaimsAll      // every claim (a StorageClass or volume appeared)
	kindReleasedVolume // a bound claim is gone
	kindNodesAll       // every Node (the cluster's network became known)
)

// item is one unit of work: a controller's object in one cluster.
type item struct {
	c         *Cluster
	kind      kind
	namespace string
	name      string
}

// Manager runs the controllers of every cluster added to it. Safe for
// concurrent use.
type Manager struct {
	opts  Options
	queue workqueue.TypedRateLimitingInterface[item]

	startOnce sync.Once
	wg        sync.WaitGroup
}

// New returns a Manager; its workers start with the first cluster.
func New(opts Options) *Manager {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// Per-item backoff only: a shared bucket would let one busy cluster
	// slow every other down.
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[item](5*time.Millisecond, 30*time.Second)
	return &Manager{opts: opts, queue: workqueue.NewTypedRateLimitingQueue(limiter)}
}

// Shutdown stops the workers once the reconciles under way return.
func (m *Manager) Shutdown() {
	m.queue.ShutDown()
	m.wg.Wait()
}

func (m *Manager) start() {
	m.startOnce.Do(func() {
		for range m.opts.Workers {
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				for m.work() {
				}
			}()
		}
	})
}

// work runs one item; false once the queue is shut down.
func (m *Manager) work() bool {
	it, shutdown := m.queue.Get()
	if shutdown {
		return false
	}
	defer m.queue.Done(it)
	if it.c.stopped.Load() {
		m.queue.Forget(it)
		return true
	}
	after, err := it.c.reconcile(it)
	switch {
	case err == nil:
		m.queue.Forget(it)
		if after > 0 {
			m.queue.AddAfter(it, after)
		}
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || errors.Is(err, errRetry):
		// Somebody else wrote first: read again.
		m.queue.AddRateLimited(it)
	default:
		m.opts.Log.Error(err, "Reconcile failed", "cluster", it.c.name, "controller", it.kind.String(), "namespace", it.namespace, "name", it.name)
		m.queue.AddRateLimited(it)
	}
	return true
}

// errRetry asks for the item again, after a backoff.
var errRetry = errors.New("not ready yet")

func (k kind) String() string {
	return [...]string{"pod", "node", "replicaset", "replicationcontroller", "deployment", "statefulset", "daemonset",
		"job", "cronjob", "service", "services", "persistentvolumeclaim", "persistentvolumeclaims", "persistentvolume", "nodes"}[k]
}

// Cluster is one cluster's controllers.
type Cluster struct {
	m       *Manager
	name    string
	store   *store.Store
	stop    func()
	stopped atomic.Bool

	// allocMu serialises the allocations (Pod IPs, cluster IPs, node
	// ports, node pod CIDRs), each read from the store: nothing is kept.
	allocMu sync.Mutex

	// mu guards the indexes the observer keeps for changes that concern
	// objects other than the one changed.
	mu sync.Mutex
	// unscheduled are the Pods waiting for a Node; a Node's change retries them.
	unscheduled map[nsName]struct{}
	// daemonSets are retried on any Node's change.
	daemonSets map[nsName]struct{}
	// waitingForCIDR are the Pods bound to a Node that has no pod CIDR yet.
	waitingForCIDR map[string][]nsName
	// servicesPerNamespace counts Services: a Pod's change concerns
	// Endpoints only where there are some.
	servicesPerNamespace map[string]int

	netMu sync.Mutex
	net   *network // read from kubeadm-config once found
}

type nsName struct{ namespace, name string }

// Add runs the controllers on the store until Stop is called; name only
// labels log lines. What the store holds already is reconciled once.
func (m *Manager) Add(name string, s *store.Store) *Cluster {
	c := &Cluster{m: m, name: name, store: s}
	m.start()
	c.stop = s.Observe(c.observe)
	c.resync()
	return c
}

// Stop ends the cluster's controllers; queued work for it is dropped.
func (c *Cluster) Stop() {
	if c.stopped.Swap(true) {
		return
	}
	c.stop()
}

func (c *Cluster) enqueue(k kind, namespace, name string) {
	c.m.queue.Add(item{c: c, kind: k, namespace: namespace, name: name})
}

func (c *Cluster) enqueueAfter(k kind, namespace, name string, d time.Duration) {
	c.m.queue.AddAfter(item{c: c, kind: k, namespace: namespace, name: name}, d)
}

// resync queues every object a controller acts on, once, when a cluster
// is added (a store restored after a restart holds work in any state).
func (c *Cluster) resync() {
	for res := range resourceKinds {
		objs, _, err := c.store.List(res, "", store.ListOptions{})
		if err != nil {
			c.m.opts.Log.Error(err, "Failed to list for the controllers' first pass", "cluster", c.name, "resource", res.Resource)
			continue
		}
		for _, o := range objs {
			c.observe(store.Change{Type: watch.Added, Resource: res, Object: o})
		}
	}
}

// resourceKinds are the resources whose own changes queue their controller.
var resourceKinds = map[store.Resource]kind{
	pods: kindPod, nodes: kindNode, replicaSets: kindReplicaSet, replicationControllers: kindReplicationController,
	deployments: kindDeployment, statefulSets: kindStatefulSet, daemonSets: kindDaemonSet, jobs: kindJob,
	cronJobs: kindCronJob, services: kindService, claims: kindClaim, storageClasses: kindClaimsAll, volumes: kindClaimsAll,
}

// ownerKinds are the controllers whose owned objects' changes queue them.
var ownerKinds = map[string]kind{
	"apps/v1/ReplicaSet": kindReplicaSet, "v1/ReplicationController": kindReplicationController,
	"apps/v1/Deployment": kindDeployment, "apps/v1/StatefulSet": kindStatefulSet, "apps/v1/DaemonSet": kindDaemonSet,
	"batch/v1/Job": kindJob, "batch/v1/CronJob": kindCronJob,
}

// observe turns a store change into work; it runs under the store's lock,
// so it only reads the objects and queues.
func (c *Cluster) observe(ch store.Change) {
	if ch.Resource == configMaps && ch.Object.GetNamespace() == metav1.NamespaceSystem && ch.Object.GetName() == kubeadmConfigName {
		c.netMu.Lock()
		c.net = nil
		c.netMu.Unlock()
		c.enqueue(kindNodesAll, "", "")
		return
	}
	k, ok := resourceKinds[ch.Resource]
	if !ok {
		return
	}
	obj := ch.Object
	key := nsName{obj.GetNamespace(), obj.GetName()}
	deleted := ch.Type == watch.Deleted
	switch k {
	case kindPod:
		c.observePod(ch, key, deleted)
		return
	case kindNode:
		// Only what scheduling reads concerns the Pods waiting for a Node
		// and the DaemonSets: not heartbeats, nor the pod CIDR IPAM writes.
		placement := ch.Previous == nil || deleted || schedulingChanged(ch.Previous, obj)
		c.mu.Lock()
		var retry []nsName
		if placement {
			for p := range c.unscheduled {
				retry = append(retry, p)
			}
		}
		if cidr, _, _ := unstructured.NestedString(obj.Object, "spec", "podCIDR"); cidr != "" || deleted {
			retry = append(retry, c.waitingForCIDR[key.name]...)
			delete(c.waitingForCIDR, key.name)
		}
		dss := len(retry)
		if placement {
			for d := range c.daemonSets {
				retry = append(retry, d)
			}
		}
		c.mu.Unlock()
		for i, r := range retry {
			if i < dss {
				c.enqueue(kindPod, r.namespace, r.name)
			} else {
				c.enqueue(kindDaemonSet, r.namespace, r.name)
			}
		}
		c.enqueue(kindNode, "", key.name)
		return
	case kindDaemonSet:
		c.mu.Lock()
		if deleted {
			delete(c.daemonSets, key)
		} else {
			if c.daemonSets == nil {
				c.daemonSets = map[nsName]struct{}{}
			}
			c.daemonSets[key] = struct{}{}
		}
		c.mu.Unlock()
	case kindService:
		if ch.Type != watch.Modified {
			c.mu.Lock()
			if c.servicesPerNamespace == nil {
				c.servicesPerNamespace = map[string]int{}
			}
			if deleted {
				c.servicesPerNamespace[key.namespace]--
				if c.servicesPerNamespace[key.namespace] <= 0 {
					delete(c.servicesPerNamespace, key.namespace)
				}
			} else {
				c.servicesPerNamespace[key.namespace]++
			}
			c.mu.Unlock()
		}
	case kindClaim:
		if deleted {
			if pv, _, _ := unstructured.NestedString(obj.Object, "spec", "volumeName"); pv != "" {
				c.enqueue(kindReleasedVolume, "", pv)
			}
			return
		}
		if phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); phase == "Bound" {
			return
		}
	case kindClaimsAll:
		if deleted {
			return
		}
		c.enqueue(kindClaimsAll, "", "")
		return
	}
	if !statusOnly(ch) || k == kindService || k == kindClaim {
		// A controller's own status write needs no second look.
		c.enqueue(k, key.namespace, key.name)
	}
	c.enqueueOwners(obj)
	if ch.Previous != nil {
		c.enqueueOwners(ch.Previous)
	}
}

func (c *Cluster) observePod(ch store.Change, key nsName, deleted bool) {
	obj := ch.Object
	node, _, _ := unstructured.NestedString(obj.Object, "spec", "nodeName")
	c.mu.Lock()
	if deleted || node != "" {
		delete(c.unscheduled, key)
	} else if obj.GetDeletionTimestamp() == nil {
		if c.unscheduled == nil {
			c.unscheduled = map[nsName]struct{}{}
		}
		c.unscheduled[key] = struct{}{}
	}
	services := c.servicesPerNamespace[key.namespace] > 0
	c.mu.Unlock()
	if !deleted && (node == "" || kubeletHasWork(obj)) {
		c.enqueue(kindPod, key.namespace, key.name)
	}
	if services {
		c.enqueue(kindServicesIn, key.namespace, "")
	}
	c.enqueueOwners(obj)
	if ch.Previous != nil {
		c.enqueueOwners(ch.Previous)
	}
}

func (c *Cluster) enqueueOwners(obj *unstructured.Unstructured) {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		if k, ok := ownerKinds[ref.APIVersion+"/"+ref.Kind]; ok {
			c.enqueue(k, obj.GetNamespace(), ref.Name)
		}
	}
}

// reconcile runs the item's controller; a positive duration asks for the
// item again after it.
func (c *Cluster) reconcile(it item) (time.Duration, error) {
	ctx := context.Background()
	var err error
	var after time.Duration
	switch it.kind {
	case kindPod:
		after, err = c.reconcilePod(ctx, it.namespace, it.name)
	case kindNode:
		after, err = c.reconcileNode(it.name)
	case kindNodesAll:
		err = c.reconcileAllNodes()
	case kindReplicaSet:
		after, err = c.reconcileReplicaSet(replicaSets, it.namespace, it.name)
	case kindReplicationController:
		after, err = c.reconcileReplicaSet(replicationControllers, it.namespace, it.name)
	case kindDeployment:
		err = c.reconcileDeployment(it.namespace, it.name)
	case kindStatefulSet:
		err = c.reconcileStatefulSet(it.namespace, it.name)
	case kindDaemonSet:
		err = c.reconcileDaemonSet(it.namespace, it.name)
	case kindJob:
		err = c.reconcileJob(it.namespace, it.name)
	case kindCronJob:
		after, err = c.reconcileCronJob(it.namespace, it.name)
	case kindService:
		err = c.reconcileService(it.namespace, it.name)
	case kindServicesIn:
		err = c.reconcileServicesIn(it.namespace)
	case kindClaim:
		err = c.reconcileClaim(it.namespace, it.name)
	case kindClaimsAll:
		err = c.reconcileAllClaims()
	case kindReleasedVolume:
		err = c.reconcileReleasedVolume(it.name)
	}
	if err != nil {
		return 0, fmt.Errorf("%s %s/%s: %w", it.kind, it.namespace, it.name, err)
	}
	return after, nil
}

// schedulingChanged says whether a Node's change concerns where Pods go:
// its labels, taints, cordon or readiness.
func schedulingChanged(before, after *unstructured.Unstructured) bool {
	if !maps.Equal(before.GetLabels(), after.GetLabels()) {
		return true
	}
	for _, f := range [][]string{{"spec", "taints"}, {"spec", "unschedulable"}} {
		b, _, _ := unstructured.NestedFieldNoCopy(before.Object, f...)
		a, _, _ := unstructured.NestedFieldNoCopy(after.Object, f...)
		if !equality.Semantic.DeepEqual(a, b) {
			return true
		}
	}
	return readyStatus(before) != readyStatus(after)
}

func readyStatus(node *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(node.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// statusOnly says whether a change left all but the status alone (what a
// controller's status write does).
func statusOnly(ch store.Change) bool {
	before, after := ch.Previous, ch.Object
	if ch.Type != watch.Modified || before == nil {
		return false
	}
	return before.GetGeneration() == after.GetGeneration() &&
		equality.Semantic.DeepEqual(before.GetDeletionTimestamp(), after.GetDeletionTimestamp()) &&
		maps.Equal(before.GetLabels(), after.GetLabels()) && maps.Equal(before.GetAnnotations(), after.GetAnnotations()) &&
		equality.Semantic.DeepEqual(before.GetOwnerReferences(), after.GetOwnerReferences())
}
