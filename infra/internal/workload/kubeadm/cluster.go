package kubeadm

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types/upstream"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Groups and users kubeadm's RBAC names.
const (
	bootstrappersGroup = "system:bootstrappers:kubeadm:default-node-token"
	nodesGroup         = "system:nodes"
	clusterAdminsGroup = "kubeadm:cluster-admins"
)

type object struct {
	res store.Resource
	obj runtime.Object
}

// initClusterConfiguration is the ClusterConfiguration kubeadm init uploads:
// the one it was given, with what kubeadm defaults filled in.
func initClusterConfiguration(c Cluster) *bootstrapv1.ClusterConfiguration {
	cc := &bootstrapv1.ClusterConfiguration{}
	if c.ClusterConfiguration != nil {
		cc = c.ClusterConfiguration.DeepCopy()
	}
	if cc.ControlPlaneEndpoint == "" {
		cc.ControlPlaneEndpoint = c.ControlPlaneEndpoint
	}
	if cc.CertificatesDir == "" {
		cc.CertificatesDir = "/etc/kubernetes/pki"
	}
	if cc.ImageRepository == "" {
		cc.ImageRepository = defaultImageRepository
	}
	if len(cc.Etcd.External.Endpoints) == 0 && cc.Etcd.Local.DataDir == "" {
		cc.Etcd.Local.DataDir = "/var/lib/etcd"
	}
	return cc
}

// kubeadmConfigData is the ClusterConfiguration of kubeadm-config, in the
// kubeadm API version of the Kubernetes version (v1beta4 from v1.31), as
// KubeadmControlPlane reads and rewrites it.
func kubeadmConfigData(c Cluster, cc *bootstrapv1.ClusterConfiguration, v semver.Version) (string, error) {
	data := &upstream.AdditionalData{
		KubernetesVersion: ptr.To("v" + v.String()),
		ClusterName:       ptr.To(c.Name),
		DNSDomain:         ptr.To(serviceDomain(c)),
		ServiceSubnet:     ptr.To(serviceSubnet(c)),
	}
	if c.PodSubnet != "" {
		data.PodSubnet = ptr.To(c.PodSubnet)
	}
	out, err := kubeadmtypes.MarshalClusterConfigurationForVersion(cc, v, data)
	if err != nil {
		return "", fmt.Errorf("failed to marshal the ClusterConfiguration: %w", err)
	}
	return out, nil
}

// clusterObjects are what kubeadm init makes once per cluster, in the
// order Ensure creates them, kubeadm-config last.
func clusterObjects(c Cluster, cc *bootstrapv1.ClusterConfiguration, v semver.Version) ([]object, error) {
	kubeadmConfig, err := kubeadmConfigData(c, cc, v)
	if err != nil {
		return nil, err
	}
	clusterInfo, err := clusterInfoKubeconfig(c)
	if err != nil {
		return nil, err
	}
	dnsIP, err := clusterDNSIP(serviceSubnet(c))
	if err != nil {
		return nil, err
	}
	repo := imageRepository(cc)

	objs := []object{
		// RBAC kubeadm's bootstrap-token, upload-config and addon phases make,
		// and cluster-admin, which kube-apiserver makes and they bind to.
		{clusterRoles, clusterRole("cluster-admin", map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"},
			rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			rbacv1.PolicyRule{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}})},
		{clusterRoles, clusterRole("kubeadm:get-nodes", nil, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}})},
		{clusterRoles, clusterRole("system:coredns", nil,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}})},
		{clusterRoleBindings, clusterRoleBinding("kubeadm:cluster-admins", "cluster-admin", group(clusterAdminsGroup))},
		{clusterRoleBindings, clusterRoleBinding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", group(bootstrappersGroup))},
		{clusterRoleBindings, clusterRoleBinding("kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", group(bootstrappersGroup))},
		{clusterRoleBindings, clusterRoleBinding("kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", group(nodesGroup))},
		{clusterRoleBindings, clusterRoleBinding("kubeadm:get-nodes", "kubeadm:get-nodes", group(bootstrappersGroup))},
		{clusterRoleBindings, clusterRoleBinding("kubeadm:node-proxier", "system:node-proxier", serviceAccount(kubeProxyName))},
		{clusterRoleBindings, clusterRoleBinding("system:coredns", "system:coredns", serviceAccount(coreDNSName))},
		{roles, role(metav1.NamespaceSystem, "kubeadm:kubelet-config", kubeletConfigName)},
		{roleBindings, roleBinding(metav1.NamespaceSystem, "kubeadm:kubelet-config", group(nodesGroup), group(bootstrappersGroup))},
		{roles, role(metav1.NamespaceSystem, "kubeadm:nodes-kubeadm-config", kubeadmConfigName)},
		{roleBindings, roleBinding(metav1.NamespaceSystem, "kubeadm:nodes-kubeadm-config", group(bootstrappersGroup), group(nodesGroup))},
		{roles, role(metav1.NamespaceSystem, kubeProxyName, kubeProxyName)},
		{roleBindings, roleBinding(metav1.NamespaceSystem, kubeProxyName, group(bootstrappersGroup))},
		{roles, role(metav1.NamespacePublic, "kubeadm:bootstrap-signer-clusterinfo", "cluster-info")},
		{roleBindings, roleBinding(metav1.NamespacePublic, "kubeadm:bootstrap-signer-clusterinfo", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:anonymous"})},

		// cluster-info: what kubeadm join reads (anonymously) to find the
		// API server and its CA.
		{configMaps, configMap(metav1.NamespacePublic, "cluster-info", map[string]string{"kubeconfig": clusterInfo})},
		{configMaps, configMap(metav1.NamespaceSystem, kubeletConfigName, map[string]string{"kubelet": kubeletConfiguration(dnsIP, serviceDomain(c))})},

		// Addons: CoreDNS and kube-proxy, which KubeadmControlPlane upgrades.
		{serviceAccounts, sa(coreDNSName)},
		{configMaps, configMap(metav1.NamespaceSystem, coreDNSName, map[string]string{"Corefile": corefile(serviceDomain(c))})},
		{deployments, coreDNSDeployment(cc, v)},
		{serviceAccounts, sa(kubeProxyName)},
		{configMaps, configMap(metav1.NamespaceSystem, kubeProxyName, map[string]string{
			"config.conf":     kubeProxyConfiguration(c.PodSubnet),
			"kubeconfig.conf": kubeProxyKubeconfig(c.ControlPlaneEndpoint),
		})},
		{daemonSets, kubeProxyDaemonSet(fmt.Sprintf("%s/kube-proxy:v%s", repo, v))},
	}
	if v.GE(semver.Version{Major: 1, Minor: 37}) {
		// kubeadm v1.37 binds the API server's kubelet client to this role
		// instead of system:masters; KubeadmControlPlane makes it on upgrades.
		objs = append(objs, object{clusterRoleBindings, clusterRoleBinding("kubeadm:apiserver-kubelet-client", "system:kubelet-api-admin",
			rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "kube-apiserver-kubelet-client"})})
	}
	objs = append(objs, object{configMaps, configMap(metav1.NamespaceSystem, kubeadmConfigName, map[string]string{clusterConfigurationKey: kubeadmConfig})})
	return objs, nil
}

func clusterRole(name string, lbls map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Rules:      rules,
	}
}

func clusterRoleBinding(name, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   subjects,
	}
}

// role allows getting one ConfigMap, what each of kubeadm's Roles does.
func role(namespace, name, configMapName string) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{configMapName}, Verbs: []string{"get"}}},
	}
}

func roleBinding(namespace, name string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   subjects,
	}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func serviceAccount(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: metav1.NamespaceSystem}
}

func sa(name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem},
	}
}

func configMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Data:       data,
	}
}

// clusterInfoKubeconfig is kube-public/cluster-info's kubeconfig: the API
// server and the CA, no credentials.
func clusterInfoKubeconfig(c Cluster) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: "https://" + c.ControlPlaneEndpoint, CertificateAuthorityData: c.CACertPEM}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return "", fmt.Errorf("failed to write the cluster-info kubeconfig: %w", err)
	}
	return string(out), nil
}

func kubeletConfiguration(dnsIP, domain string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
cgroupDriver: systemd
clusterDNS:
- %s
clusterDomain: %s
kind: KubeletConfiguration
rotateCertificates: true
staticPodPath: /etc/kubernetes/manifests
`, dnsIP, domain)
}

func corefile(domain string) string {
	return fmt.Sprintf(`.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes %s in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success %s
       disable denial %s
    }
    loop
    reload
    loadbalance
}
`, domain, domain, domain)
}

func kubeProxyConfiguration(podSubnet string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
clientConnection:
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
clusterCIDR: %q
kind: KubeProxyConfiguration
mode: ""
`, podSubnet)
}

func kubeProxyKubeconfig(endpoint string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: https://%s
  name: default
contexts:
- context:
    cluster: default
    namespace: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
`, endpoint)
}

// coreDNSDeployment is kubeadm's CoreDNS addon, made with an available
// status; in a served cluster the workload controllers then make its
// ReplicaSet and Pods.
// KubeadmControlPlane reads its "coredns" container's image to upgrade it.
func coreDNSDeployment(cc *bootstrapv1.ClusterConfiguration, v semver.Version) *appsv1.Deployment {
	repo := imageRepository(cc)
	if cc.DNS.ImageRepository != "" {
		repo = strings.TrimSuffix(cc.DNS.ImageRepository, "/")
	}
	tag := coreDNSImageTag(v)
	if cc.DNS.ImageTag != "" {
		tag = cc.DNS.ImageTag
	}
	selector := map[string]string{"k8s-app": "kube-dns"}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSName, Namespace: metav1.NamespaceSystem, Labels: selector},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromString("25%")),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec: corev1.PodSpec{
					PriorityClassName:  "system-cluster-critical",
					ServiceAccountName: coreDNSName,
					NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
					Tolerations: []corev1.Toleration{
						{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
						{Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule},
					},
					Containers: []corev1.Container{{
						Name:  coreDNSName,
						Image: fmt.Sprintf("%s/coredns/coredns:%s", repo, tag),
						Args:  []string{"-conf", "/etc/coredns/Corefile"},
						VolumeMounts: []corev1.VolumeMount{{
							Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true,
						}},
					}},
					Volumes: []corev1.Volume{{
						Name: "config-volume",
						VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: coreDNSName},
							Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}},
						}},
					}},
				},
			},
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
					Message: "Deployment has minimum availability.", LastUpdateTime: now, LastTransitionTime: now},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
					Message: `ReplicaSet "coredns" has successfully progressed.`, LastUpdateTime: now, LastTransitionTime: now},
			},
		},
	}
}

// kubeProxyDaemonSet is kubeadm's kube-proxy addon; KubeadmControlPlane
// sets its "kube-proxy" container's image on upgrades.
func kubeProxyDaemonSet(image string) *appsv1.DaemonSet {
	selector := map[string]string{"k8s-app": kubeProxyName}
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: kubeProxyName, Namespace: metav1.NamespaceSystem, Labels: selector},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec: corev1.PodSpec{
					HostNetwork:        true,
					PriorityClassName:  "system-node-critical",
					ServiceAccountName: kubeProxyName,
					NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:    kubeProxyName,
						Image:   image,
						Command: []string{"/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)"},
						Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"},
						}}},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
					}},
				},
			},
		},
	}
}

func imageRepository(cc *bootstrapv1.ClusterConfiguration) string {
	if cc.ImageRepository != "" {
		return strings.TrimSuffix(cc.ImageRepository, "/")
	}
	return defaultImageRepository
}

func etcdRepository(cc *bootstrapv1.ClusterConfiguration) string {
	if cc.Etcd.Local.ImageRepository != "" {
		return strings.TrimSuffix(cc.Etcd.Local.ImageRepository, "/")
	}
	return imageRepository(cc)
}

func etcdDataDir(cc *bootstrapv1.ClusterConfiguration) string {
	if cc.Etcd.Local.DataDir != "" {
		return cc.Etcd.Local.DataDir
	}
	return "/var/lib/etcd"
}

func etcdServers(cc *bootstrapv1.ClusterConfiguration) string {
	if len(cc.Etcd.External.Endpoints) > 0 {
		return strings.Join(cc.Etcd.External.Endpoints, ",")
	}
	return "https://127.0.0.1:2379"
}

// etcdImageTag and coreDNSImageTag are the images kubeadm of each
// Kubernetes minor deploys by default (its constants, close enough: nothing
// runs them, KubeadmControlPlane only parses the CoreDNS tag as semver).
func etcdImageTag(cc *bootstrapv1.ClusterConfiguration, v semver.Version) string {
	if cc.Etcd.Local.ImageTag != "" {
		return cc.Etcd.Local.ImageTag
	}
	switch {
	case v.Minor <= 31:
		return "3.5.15-0"
	case v.Minor == 32:
		return "3.5.16-0"
	case v.Minor == 33:
		return "3.5.21-0"
	case v.Minor == 34:
		return "3.6.4-0"
	default:
		return "3.6.5-0"
	}
}

func coreDNSImageTag(v semver.Version) string {
	switch {
	case v.Minor <= 32:
		return "v1.11.3"
	case v.Minor == 33:
		return "v1.12.0"
	default:
		return "v1.12.1"
	}
}

func serviceSubnet(c Cluster) string {
	if c.ServiceSubnet != "" {
		return c.ServiceSubnet
	}
	return defaultServiceSubnet
}

func serviceDomain(c Cluster) string {
	if c.ServiceDomain != "" {
		return c.ServiceDomain
	}
	return defaultServiceDomain
}

// clusterDNSIP is the tenth address of the first service subnet, the
// ClusterIP kubeadm gives the kube-dns Service.
func clusterDNSIP(subnets string) (string, error) {
	first := strings.TrimSpace(strings.Split(subnets, ",")[0])
	p, err := netip.ParsePrefix(first)
	if err != nil {
		return "", fmt.Errorf("failed to parse the service subnet %q: %w", first, err)
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a.String(), nil
}
