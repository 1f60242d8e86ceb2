package kubeadm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// Well-known names and labels of kubeadm and the kubelet.
const (
	// LabelControlPlane is the role label kubeadm puts on control-plane
	// nodes; KubeadmControlPlane lists control-plane Nodes by it.
	LabelControlPlane = "node-role.kubernetes.io/control-plane"
	// LabelExcludeFromExternalLB is the label kubeadm puts on control-plane
	// nodes so that cloud load balancers of Services skip them.
	LabelExcludeFromExternalLB = "node.kubernetes.io/exclude-from-external-load-balancers"

	kubeadmConfigName       = "kubeadm-config"
	clusterConfigurationKey = "ClusterConfiguration"
	kubeletConfigName       = "kubelet-config"
	kubeProxyName           = "kube-proxy"
	coreDNSName             = "coredns"
	nodeLeaseNamespace      = "kube-node-lease"

	defaultImageRepository = "registry.k8s.io"
	defaultServiceSubnet   = "10.96.0.0/12"
	defaultServiceDomain   = "cluster.local"
	apiServerPort          = 6443

	mirrorAnnotation = "kubernetes.io/config.mirror"
)

// controlPlaneTaint is the taint kubeadm registers control-plane nodes with
// unless nodeRegistration.taints says otherwise.
var controlPlaneTaint = corev1.Taint{Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}

// nodeObject is the Node as the kubelet registers it and kubeadm marks it:
// Ready, with the kubelet's labels, the kubeadm role label and taint on
// control-plane nodes, and the node info core copies onto the Machine.
func nodeObject(n Node, now time.Time) *corev1.Node {
	lbls := map[string]string{
		corev1.LabelHostname:      n.Name,
		corev1.LabelOSStable:      "linux",
		corev1.LabelArchStable:    "amd64",
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": "amd64",
	}
	if n.ControlPlane {
		lbls[LabelControlPlane] = ""
		lbls[LabelExcludeFromExternalLB] = ""
	}
	maps.Copy(lbls, n.Labels)

	var taints []corev1.Taint
	switch {
	case n.Taints != nil:
		taints = append(taints, *n.Taints...)
	case n.ControlPlane:
		taints = []corev1.Taint{controlPlaneTaint}
	}

	addrs := append([]corev1.NodeAddress(nil), n.Addresses...)
	hasHostname := false
	for _, a := range addrs {
		hasHostname = hasHostname || a.Type == corev1.NodeHostName
	}
	if !hasHostname {
		// The kubelet always reports its hostname.
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
	}

	ids := sum(n.Name)
	transition := metav1.NewTime(now.Truncate(time.Second))
	condition := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: transition, LastTransitionTime: transition}
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("2"),
		corev1.ResourceMemory:           resource.MustParse("8Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   n.Name,
			Labels: lbls,
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: n.ProviderID, Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Conditions: []corev1.NodeCondition{
				condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses:       addrs,
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               ids[:32],
				SystemUUID:              uuidOf(ids[32:64]),
				BootID:                  uuidOf(ids[:32]),
				KernelVersion:           "6.8.0-inmemory",
				OSImage:                 "capi-monolith inMemory machine",
				ContainerRuntimeVersion: "inmemory://v1",
				KubeletVersion:          n.KubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
}

// leaseObject is the node's heartbeat Lease in kube-node-lease, as the
// kubelet makes it (it is not renewed here: nothing reads its age).
func leaseObject(node *unstructured.Unstructured, now time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            node.GetName(),
			Namespace:       nodeLeaseNamespace,
			OwnerReferences: []metav1.OwnerReference{nodeOwner(node, false)},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(node.GetName()),
			LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime:            ptr.To(metav1.NewMicroTime(now)),
		},
	}
}

func nodeOwner(node *unstructured.Unstructured, controller bool) metav1.OwnerReference {
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.GetName(), UID: node.GetUID()}
	if controller {
		ref.Controller = ptr.To(true)
	}
	return ref
}

// staticPodComponents are the static Pods kubeadm writes on a control-plane
// node; etcd only when the cluster's etcd is local.
var staticPodComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

func localEtcd(cc *bootstrapv1.ClusterConfiguration) bool {
	return len(cc.Etcd.External.Endpoints) == 0
}

// staticPod is the mirror Pod the kubelet makes for a kubeadm static Pod
// manifest, Running and Ready: named <component>-<node> in kube-system,
// labelled component=<component> and tier=control-plane (KubeadmControlPlane
// reads its phase and Ready condition; the etcd helper reads etcd Pods'
// podIP), annotated as a mirror Pod (drain skips it), owned by the Node.
func staticPod(component string, node *unstructured.Unstructured, c Cluster, n Node, cc *bootstrapv1.ClusterConfiguration, v semver.Version, now time.Time) *corev1.Pod {
	ip := internalIP(n.Addresses)
	hash := sum(n.Name + "/" + component)[:32]
	annotations := map[string]string{
		"kubernetes.io/config.hash":   hash,
		mirrorAnnotation:              hash,
		"kubernetes.io/config.seen":   now.UTC().Format(time.RFC3339Nano),
		"kubernetes.io/config.source": "file",
	}
	repo := imageRepository(cc)
	image := fmt.Sprintf("%s/%s:v%s", repo, component, v)
	var command []string
	var cpu string
	switch component {
	case "kube-apiserver":
		cpu = "250m"
		annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] = fmt.Sprintf("%s:%d", ip, apiServerPort)
		command = []string{"kube-apiserver", "--advertise-address=" + ip, fmt.Sprintf("--secure-port=%d", apiServerPort),
			"--etcd-servers=" + etcdServers(cc), "--service-cluster-ip-range=" + serviceSubnet(c),
			"--authorization-mode=Node,RBAC", "--client-ca-file=/etc/kubernetes/pki/ca.crt"}
	case "kube-controller-manager":
		cpu = "200m"
		command = []string{"kube-controller-manager", "--kubeconfig=/etc/kubernetes/controller-manager.conf", "--leader-elect=true",
			"--cluster-name=" + c.Name, "--service-cluster-ip-range=" + serviceSubnet(c), "--use-service-account-credentials=true"}
		if c.PodSubnet != "" {
			command = append(command, "--allocate-node-cidrs=true", "--cluster-cidr="+c.PodSubnet)
		}
	case "kube-scheduler":
		cpu = "100m"
		command = []string{"kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf", "--leader-elect=true"}
	case "etcd":
		cpu = "100m"
		image = fmt.Sprintf("%s/etcd:%s", etcdRepository(cc), etcdImageTag(cc, v))
		annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] = fmt.Sprintf("https://%s:2379", ip)
		command = []string{"etcd", "--name=" + n.Name, "--data-dir=" + etcdDataDir(cc),
			fmt.Sprintf("--advertise-client-urls=https://%s:2379", ip),
			fmt.Sprintf("--initial-advertise-peer-urls=https://%s:2380", ip),
			fmt.Sprintf("--listen-client-urls=https://127.0.0.1:2379,https://%s:2379", ip),
			"--client-cert-auth=true", "--peer-client-cert-auth=true"}
	}
	start := metav1.NewTime(now.Truncate(time.Second))
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            component + "-" + n.Name,
			Namespace:       metav1.NamespaceSystem,
			Labels:          map[string]string{"component": component, "tier": "control-plane"},
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{nodeOwner(node, true)},
		},
		Spec: corev1.PodSpec{
			NodeName:                      n.Name,
			HostNetwork:                   true,
			PriorityClassName:             "system-node-critical",
			Priority:                      ptr.To[int32](2000001000),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			DNSPolicy:                     corev1.DNSClusterFirst,
			SchedulerName:                 corev1.DefaultSchedulerName,
			EnableServiceLinks:            ptr.To(true),
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			Containers: []corev1.Container{{
				Name:                     component,
				Image:                    image,
				Command:                  command,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				TerminationMessagePath:   corev1.TerminationMessagePathDefault,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				Resources:                corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
		Status: runningStatus(component, image, ip, start),
	}
}

// kubeProxyPod is the node's Pod of the kube-proxy DaemonSet, Running and
// Ready, owned by the DaemonSet (drain skips DaemonSet Pods). Its name is
// derived from the node's, so that it is found again after a restart.
func kubeProxyPod(ds, node *unstructured.Unstructured, n Node, v semver.Version, now time.Time) *corev1.Pod {
	ip := internalIP(n.Addresses)
	image, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	img := ""
	if len(image) > 0 {
		if c, ok := image[0].(map[string]any); ok {
			img, _ = c["image"].(string)
		}
	}
	if img == "" {
		img = fmt.Sprintf("%s/kube-proxy:v%s", defaultImageRepository, v)
	}
	start := metav1.NewTime(now.Truncate(time.Second))
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:         kubeProxyName + "-" + suffix(n.Name),
			GenerateName: kubeProxyName + "-",
			Namespace:    metav1.NamespaceSystem,
			Labels: map[string]string{
				"k8s-app":                  kubeProxyName,
				"controller-revision-hash": "1",
				"pod-template-generation":  "1",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.GetName(), UID: types.UID(ds.GetUID()),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:           n.Name,
			HostNetwork:        true,
			PriorityClassName:  "system-node-critical",
			Priority:           ptr.To[int32](2000001000),
			RestartPolicy:      corev1.RestartPolicyAlways,
			DNSPolicy:          corev1.DNSClusterFirst,
			SchedulerName:      corev1.DefaultSchedulerName,
			ServiceAccountName: kubeProxyName,
			NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
			Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:    kubeProxyName,
				Image:   img,
				Command: []string{"/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)"},
			}},
		},
		Status: runningStatus(kubeProxyName, img, ip, start),
	}
}

// runningStatus is a Pod's status once the kubelet has started its one
// container and the container is ready.
func runningStatus(container, image, ip string, start metav1.Time) corev1.PodStatus {
	ready := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: start}
	}
	st := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			ready("PodReadyToStartContainers"), ready(corev1.PodInitialized), ready(corev1.PodReady),
			ready(corev1.ContainersReady), ready(corev1.PodScheduled),
		},
		StartTime: &start,
		QOSClass:  corev1.PodQOSBurstable,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name:         container,
			Image:        image,
			ImageID:      image,
			ContainerID:  "inmemory://" + sum(container + ip + start.String())[:64],
			Ready:        true,
			Started:      ptr.To(true),
			RestartCount: 0,
			State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
		}},
	}
	if ip != "" {
		st.HostIP = ip
		st.HostIPs = []corev1.HostIP{{IP: ip}}
		st.PodIP = ip
		st.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	return st
}

// internalIP is the node's first InternalIP (else its first address): what
// host-network Pods on it, and so its etcd member, have as IP.
func internalIP(addrs []corev1.NodeAddress) string {
	for _, a := range addrs {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	for _, a := range addrs {
		if a.Type == corev1.NodeExternalIP {
			return a.Address
		}
	}
	return ""
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func uuidOf(hex32 string) string {
	return strings.Join([]string{hex32[:8], hex32[8:12], hex32[12:16], hex32[16:20], hex32[20:32]}, "-")
}

// suffix is five characters of the alphabet kube-apiserver's generateName
// uses, derived from s.
func suffix(s string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	h := sha256.Sum256([]byte(s))
	out := make([]byte, 5)
	for i := range out {
		out[i] = alphabet[int(h[i])%len(alphabet)]
	}
	return string(out)
}
