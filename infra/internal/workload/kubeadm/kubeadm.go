package kubeadm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/blang/semver/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Cluster is what kubeadm init knows of the cluster it makes.
type Cluster struct {
	// Name is the Cluster API cluster's name (ClusterConfiguration.clusterName).
	Name string
	// ControlPlaneEndpoint is the API server endpoint, host:port.
	ControlPlaneEndpoint string
	// KubernetesVersion is the version of the machine running kubeadm init, e.g. v1.36.3.
	KubernetesVersion string
	// PodSubnet and ServiceSubnet are comma-separated CIDRs, as kubeadm
	// writes them; empty is allowed (kubeadm's default service subnet,
	// 10.96.0.0/12, is then written).
	PodSubnet, ServiceSubnet string
	// ServiceDomain is the cluster's DNS domain; default cluster.local.
	ServiceDomain string
	// CACertPEM is the cluster CA, for kube-public/cluster-info.
	CACertPEM []byte
	// ClusterConfiguration is the ClusterConfiguration the init machine's
	// bootstrap data carries (Bootstrap.ClusterConfiguration), if known:
	// kubeadm-config is made from it, as kubeadm uploads the configuration it
	// was given (with the fields above filled in). Nil means kubeadm's
	// defaults. An external etcd in it means no etcd static Pods.
	ClusterConfiguration *bootstrapv1.ClusterConfiguration
}

// Node is one machine as kubeadm and the kubelet register it.
type Node struct {
	Name, ProviderID, KubeletVersion string
	// Addresses are the Node's status.addresses; the first InternalIP is the
	// static Pods' (host network) IP, and so the etcd member's.
	Addresses    []corev1.NodeAddress
	ControlPlane bool
	// Labels are extra labels (e.g. topology.kubernetes.io/zone for a
	// failure domain, or kubeletExtraArgs node-labels: Bootstrap.NodeLabels).
	Labels map[string]string
	// Taints are the taints the node registers with, as kubeadm's
	// nodeRegistration.taints (Bootstrap.NodeRegistration.Taints): nil means
	// kubeadm's default (the control-plane NoSchedule taint on control-plane
	// nodes, none on workers), a pointer to an empty slice means none.
	Taints *[]corev1.Taint
}

// Role is what bootstrap data makes of a machine.
type Role string

// Roles of kubeadm bootstrap data.
const (
	Init             Role = "Init"
	JoinControlPlane Role = "JoinControlPlane"
	JoinWorker       Role = "JoinWorker"
)

// ErrNotKubeadm is returned (wrapped) by Parse and Recognize for data that is
// not kubeadm bootstrap data.
var ErrNotKubeadm = errors.New("not kubeadm bootstrap data")

// ErrMalformed is returned (wrapped, with ErrNotKubeadm) by Parse and
// Recognize for data that cannot be read as its format: a cloud-config
// that is not YAML, an Ignition config that is not JSON. Data that reads
// well but holds no kubeadm configuration wraps ErrNotKubeadm alone.
var ErrMalformed = errors.New("malformed bootstrap data")

// Resources of the store this package writes.
var (
	nodes               = store.Resource{Resource: "nodes"}
	pods                = store.Resource{Resource: "pods", Namespaced: true}
	configMaps          = store.Resource{Resource: "configmaps", Namespaced: true}
	serviceAccounts     = store.Resource{Resource: "serviceaccounts", Namespaced: true}
	leases              = store.Resource{Group: "coordination.k8s.io", Resource: "leases", Namespaced: true}
	deployments         = store.Resource{Group: "apps", Resource: "deployments", Namespaced: true}
	daemonSets          = store.Resource{Group: "apps", Resource: "daemonsets", Namespaced: true}
	roles               = store.Resource{Group: "rbac.authorization.k8s.io", Resource: "roles", Namespaced: true}
	roleBindings        = store.Resource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespaced: true}
	clusterRoles        = store.Resource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}
	clusterRoleBindings = store.Resource{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}
)

// Ensure makes the store hold what kubeadm init or join and the kubelet
// would have made for the node and, for a control-plane node of a cluster
// not yet initialized (no kubeadm-config), the cluster-wide objects kubeadm
// init makes. It only creates what is missing: what exists is left as it is
// (a person's change to a Node condition or label, KubeadmControlPlane's
// update of kubeadm-config), so it is idempotent and rebuilds a store after
// a restart; the node's own objects (Node, Lease, static Pods, kube-proxy
// Pod) are made again when deleted, as the kubelet would. The one change to
// an existing object is the kube-proxy DaemonSet's status counts, which
// follow its Pods as the DaemonSet controller's would. Ensure may be called
// concurrently for the nodes of one store.
func Ensure(ctx context.Context, s *store.Store, c Cluster, n Node) error {
	if n.Name == "" {
		return errors.New("failed to ensure the kubeadm node: no node name")
	}
	v, err := parseVersion(n.KubeletVersion)
	if err != nil {
		return fmt.Errorf("failed to ensure node %s: %w", n.Name, err)
	}
	now := time.Now()

	node, err := ensureNamed(s, nodes, "", n.Name, func() runtime.Object { return nodeObject(n, now) })
	if err != nil {
		return fmt.Errorf("failed to ensure Node %s: %w", n.Name, err)
	}
	if node, err = followVersion(ctx, s, node, n); err != nil {
		return err
	}
	if _, err := ensureNamed(s, leases, nodeLeaseNamespace, n.Name, func() runtime.Object { return leaseObject(node, now) }); err != nil {
		return fmt.Errorf("failed to ensure the Lease of Node %s: %w", n.Name, err)
	}

	if n.ControlPlane {
		cv, err := parseVersion(c.KubernetesVersion)
		if err != nil {
			return fmt.Errorf("failed to ensure the cluster objects: %w", err)
		}
		cm, err := s.Get(configMaps, metav1.NamespaceSystem, kubeadmConfigName)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to get the kubeadm-config ConfigMap: %w", err)
		}
		// Decoded only when something is to be made: most Ensures find all there.
		cc := sync.OnceValue(func() *bootstrapv1.ClusterConfiguration { return clusterConfiguration(cm, c) })

		// Static Pods run what the node's own kubeadm wrote, at its version.
		for _, component := range staticPodComponents {
			if err := ctx.Err(); err != nil {
				return err
			}
			podName := component + "-" + n.Name
			if component == "etcd" {
				if _, err := s.Get(pods, metav1.NamespaceSystem, podName); err == nil || !apierrors.IsNotFound(err) || !localEtcd(cc()) {
					continue // there, unreadable (the next Ensure tells), or not kubeadm's to run
				}
			}
			build := func() runtime.Object { return staticPod(component, node, c, n, cc(), v, now) }
			if _, err := ensureNamed(s, pods, metav1.NamespaceSystem, podName, build); err != nil {
				return fmt.Errorf("failed to ensure static Pod %s: %w", podName, err)
			}
		}
		// kubeadm init makes the cluster-wide objects once; after that (as in
		// a real cluster) what a person or a controller deletes stays deleted.
		if cm == nil {
			if err := ensureClusterObjects(ctx, s, c, cc(), cv); err != nil {
				return err
			}
		}
	}

	if err := ensureKubeProxyPod(s, node, n, v, now); err != nil {
		return err
	}
	return nil
}

// followVersion makes an in-place change of the node's Kubernetes version
// (Cluster API's in-place updates change a Machine's version without
// replacing it) true as the upgraded kubelet and `kubeadm upgrade node`
// would: the Node reports the new kubelet version, and the node's static
// Pods are deleted so that Ensure makes them again at the new version, as
// the kubelet restarts them from rewritten manifests. kube-proxy is the
// DaemonSet's (KubeadmControlPlane updates its image), and a Node already at
// its version is not touched.
func followVersion(ctx context.Context, s *store.Store, node *unstructured.Unstructured, n Node) (*unstructured.Unstructured, error) {
	for range 5 {
		have, _, _ := unstructured.NestedString(node.Object, "status", "nodeInfo", "kubeletVersion")
		if have == n.KubeletVersion {
			return node, nil
		}
		bound, _, err := s.List(pods, metav1.NamespaceSystem, store.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name)})
		if err != nil {
			return nil, fmt.Errorf("failed to list the Pods of Node %s: %w", n.Name, err)
		}
		for _, p := range bound {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if _, static := p.GetAnnotations()[mirrorAnnotation]; !static {
				continue
			}
			if _, _, err := s.Delete(pods, p.GetNamespace(), p.GetName(), store.Preconditions{}); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("failed to delete Pod %s/%s for the node's new version: %w", p.GetNamespace(), p.GetName(), err)
			}
		}
		updated := node.DeepCopy()
		if err := unstructured.SetNestedField(updated.Object, n.KubeletVersion, "status", "nodeInfo", "kubeletVersion"); err != nil {
			return nil, fmt.Errorf("failed to set the kubelet version of Node %s: %w", n.Name, err)
		}
		if _, ok, _ := unstructured.NestedString(updated.Object, "status", "nodeInfo", "kubeProxyVersion"); ok {
			_ = unstructured.SetNestedField(updated.Object, n.KubeletVersion, "status", "nodeInfo", "kubeProxyVersion")
		}
		got, err := s.Update(nodes, updated)
		if apierrors.IsConflict(err) {
			if node, err = s.Get(nodes, "", n.Name); err != nil {
				return nil, fmt.Errorf("failed to get Node %s: %w", n.Name, err)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("failed to update the kubelet version of Node %s: %w", n.Name, err)
		}
		return got, nil
	}
	return nil, fmt.Errorf("failed to update the kubelet version of Node %s: it kept changing", n.Name)
}

// Remove deletes what Ensure made for the node: the Node, its Lease, and
// every Pod bound to it (as the Pod garbage collector deletes the Pods of a
// deleted Node: the static Pods, kube-proxy, and whatever else was bound).
// What is already gone is no error.
func Remove(ctx context.Context, s *store.Store, nodeName string) error {
	if _, _, err := s.Delete(nodes, "", nodeName, store.Preconditions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete Node %s: %w", nodeName, err)
	}
	if _, _, err := s.Delete(leases, nodeLeaseNamespace, nodeName, store.Preconditions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete the Lease of Node %s: %w", nodeName, err)
	}
	bound, _, err := s.List(pods, "", store.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName)})
	if err != nil {
		return fmt.Errorf("failed to list the Pods of Node %s: %w", nodeName, err)
	}
	for _, p := range bound {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, _, err := s.Delete(pods, p.GetNamespace(), p.GetName(), store.Preconditions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete Pod %s/%s: %w", p.GetNamespace(), p.GetName(), err)
		}
	}
	return updateKubeProxyStatus(s)
}

// ensureClusterObjects makes what kubeadm init makes once per cluster.
// kubeadm-config goes last: its presence is what tells KubeadmControlPlane
// the control plane is initialized, so it must not appear before the rest
// (an error half-way leaves it missing, and the next Ensure completes).
func ensureClusterObjects(ctx context.Context, s *store.Store, c Cluster, cc *bootstrapv1.ClusterConfiguration, v semver.Version) error {
	objs, err := clusterObjects(c, cc, v)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := ensure(s, o.res, o.obj); err != nil {
			return fmt.Errorf("failed to ensure %s %s: %w", o.obj.GetObjectKind().GroupVersionKind().Kind, name(o.obj), err)
		}
	}
	return nil
}

// clusterConfiguration is the ClusterConfiguration of the cluster: the one
// stored in kubeadm-config when there is one (KubeadmControlPlane may have
// changed it since), otherwise the one kubeadm init uploads.
func clusterConfiguration(kubeadmConfig *unstructured.Unstructured, c Cluster) *bootstrapv1.ClusterConfiguration {
	if kubeadmConfig == nil {
		return initClusterConfiguration(c)
	}
	data, _, _ := unstructured.NestedString(kubeadmConfig.Object, "data", clusterConfigurationKey)
	cc, _, err := kubeadmtypes.UnmarshalClusterConfiguration(data)
	if err != nil {
		// A person broke it; kubeadm's defaults still say what runs.
		return initClusterConfiguration(c)
	}
	return cc
}

// ensureKubeProxyPod makes the node's kube-proxy Pod once the kube-proxy
// DaemonSet exists (a worker Ensured before any control plane gets it on a
// later Ensure), and then brings the DaemonSet's status counts up to date.
func ensureKubeProxyPod(s *store.Store, node *unstructured.Unstructured, n Node, v semver.Version, now time.Time) error {
	ds, err := s.Get(daemonSets, metav1.NamespaceSystem, kubeProxyName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to get the kube-proxy DaemonSet: %w", err)
	}
	existing, _, err := s.List(pods, metav1.NamespaceSystem, store.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{"k8s-app": kubeProxyName}),
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name),
	})
	if err != nil {
		return fmt.Errorf("failed to list the kube-proxy Pods of Node %s: %w", n.Name, err)
	}
	if len(existing) > 0 {
		// Counted when it was made; not listing every kube-proxy Pod on each
		// Ensure keeps a reconcile's cost independent of the cluster's size.
		return nil
	}
	if _, err := ensure(s, pods, kubeProxyPod(ds, node, n, v, now)); err != nil {
		return fmt.Errorf("failed to ensure the kube-proxy Pod of Node %s: %w", n.Name, err)
	}
	return updateKubeProxyStatus(s)
}

// updateKubeProxyStatus sets the kube-proxy DaemonSet's status counts from
// its Pods, as the DaemonSet controller does.
func updateKubeProxyStatus(s *store.Store) error {
	for range 5 {
		ds, err := s.Get(daemonSets, metav1.NamespaceSystem, kubeProxyName)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("failed to get the kube-proxy DaemonSet: %w", err)
		}
		proxies, _, err := s.List(pods, metav1.NamespaceSystem, store.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"k8s-app": kubeProxyName})})
		if err != nil {
			return fmt.Errorf("failed to list the kube-proxy Pods: %w", err)
		}
		n := int64(len(proxies))
		want := map[string]any{
			"currentNumberScheduled": n, "desiredNumberScheduled": n, "numberAvailable": n,
			"numberMisscheduled": int64(0), "numberReady": n, "updatedNumberScheduled": n,
			"observedGeneration": ds.GetGeneration(),
		}
		if n == 0 {
			delete(want, "numberAvailable") // omitted when zero, as the API serialises it
		}
		status, _, _ := unstructured.NestedMap(ds.Object, "status")
		if sameCounts(status, want) {
			return nil
		}
		for k, val := range want {
			status = setMap(status, k, val)
		}
		if n == 0 {
			delete(status, "numberAvailable")
		}
		ds.Object["status"] = status
		if _, err := s.Update(daemonSets, ds); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			return fmt.Errorf("failed to update the kube-proxy DaemonSet status: %w", err)
		}
		return nil
	}
	return errors.New("failed to update the kube-proxy DaemonSet status: conflicts persist")
}

func sameCounts(status, want map[string]any) bool {
	for k, v := range want {
		if fmt.Sprint(status[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

func setMap(m map[string]any, k string, v any) map[string]any {
	if m == nil {
		m = map[string]any{}
	}
	m[k] = v
	return m
}

// ensure creates obj unless an object of that name exists, and returns what
// is stored.
func ensure(s *store.Store, res store.Resource, obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	return ensureNamed(s, res, m.GetNamespace(), m.GetName(), func() runtime.Object { return obj })
}

// ensureNamed is ensure building the object only when it is missing: what
// most Ensures find exists, and building and converting costs more than
// looking.
func ensureNamed(s *store.Store, res store.Resource, namespace, name string, build func() runtime.Object) (*unstructured.Unstructured, error) {
	if got, err := s.Get(res, namespace, name); err == nil {
		return got, nil
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(build())
	if err != nil {
		return nil, fmt.Errorf("failed to convert to unstructured: %w", err)
	}
	u := &unstructured.Unstructured{Object: raw}
	got, err := s.Create(res, u)
	if apierrors.IsAlreadyExists(err) {
		// Made concurrently since the Get.
		return s.Get(res, u.GetNamespace(), u.GetName())
	}
	return got, err
}

func name(obj runtime.Object) string {
	m, err := metaOf(obj)
	if err != nil {
		return "?"
	}
	if m.GetNamespace() != "" {
		return m.GetNamespace() + "/" + m.GetName()
	}
	return m.GetName()
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

func parseVersion(v string) (semver.Version, error) {
	if v == "" {
		return semver.Version{}, errors.New("no Kubernetes version")
	}
	parsed, err := semver.ParseTolerant(v)
	if err != nil {
		return semver.Version{}, fmt.Errorf("failed to parse Kubernetes version %q: %w", v, err)
	}
	return parsed, nil
}
