package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// FailureDomainNetworkAttribute is the attribute of a failure domain (in
// spec.failureDomains[].attributes) that names a Docker network: the docker
// nodes placed in that domain join it, besides the cluster's network. It is
// created when missing, and removed with the cluster when it made it.
const FailureDomainNetworkAttribute = "network"

// MonolithClusterSpec is the desired state of a MonolithCluster.
type MonolithClusterSpec struct {
	// controlPlaneEndpoint is where the workload cluster's API server is
	// reached. Filled in by the backend when empty.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// backend that provisions the cluster: exactly one of docker or inMemory.
	// +required
	Backend ClusterBackend `json:"backend"`

	// failureDomains offered to the cluster's machines; reported in
	// status.failureDomains. A machine's node is placed in the domain its
	// Machine names: the docker backend labels the node container
	// capi-monolith.dev/failure-domain and, when the domain has a "network"
	// attribute, attaches it to that Docker network too; the inMemory
	// backend records the domain as the node's zone.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`
}

// ClusterBackend picks the backend of a cluster.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:MaxProperties=1
type ClusterBackend struct {
	// docker runs the cluster on the Docker Engine: a network and a load
	// balancer container.
	// +optional
	Docker *DockerClusterBackend `json:"docker,omitempty"`
	// inMemory simulates the cluster; nothing runs.
	// +optional
	InMemory *InMemoryClusterBackend `json:"inMemory,omitempty"`
}

// DockerClusterBackend configures the docker backend of a cluster.
type DockerClusterBackend struct {
	// network is the Docker network of the cluster's containers; created
	// when missing. Default "kind", so kind and this provider can share it.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Network string `json:"network,omitempty"`
	// loadBalancerImage runs the control plane load balancer.
	// Default "kindest/haproxy:v20230606-42a2262b".
	// +kubebuilder:validation:MaxLength=512
	// +optional
	LoadBalancerImage string `json:"loadBalancerImage,omitempty"`
	// loadBalancerHostPort publishes the load balancer on this port of the
	// Docker host, so the endpoint is reachable from the host (Docker
	// Desktop included). 0 picks a free port and keeps it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	LoadBalancerHostPort int32 `json:"loadBalancerHostPort,omitempty"`
}

// InMemoryClusterBackend configures the inMemory backend of a cluster.
type InMemoryClusterBackend struct {
	// nodeCIDR is where simulated nodes get addresses when they take none
	// from an IP pool. Default "10.128.0.0/16".
	// +kubebuilder:validation:MaxLength=64
	// +optional
	NodeCIDR string `json:"nodeCIDR,omitempty"`
}

// MonolithClusterStatus is the observed state of a MonolithCluster.
type MonolithClusterStatus struct {
	// initialization reports when the cluster's infrastructure is provisioned.
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`

	// failureDomains available to the cluster's machines.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// conditions: Ready, Paused, LoadBalancerAvailable.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MonolithCluster is Cluster API's infrastructure cluster of capi-monolith.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=monolithclusters,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Infrastructure provisioned"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control plane endpoint host"
// +kubebuilder:printcolumn:name="Port",type="integer",JSONPath=".spec.controlPlaneEndpoint.port",description="Control plane endpoint port"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type MonolithCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MonolithClusterSpec   `json:"spec,omitempty"`
	Status MonolithClusterStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions.
func (c *MonolithCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions.
func (c *MonolithCluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// MonolithClusterList is a list of MonolithClusters.
//
// +kubebuilder:object:root=true
type MonolithClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MonolithCluster `json:"items"`
}

// MonolithClusterTemplateSpec is the spec of a MonolithClusterTemplate.
type MonolithClusterTemplateSpec struct {
	// template of the MonolithClusters made from it.
	// +required
	Template MonolithClusterTemplateResource `json:"template"`
}

// MonolithClusterTemplateResource is what a MonolithClusterTemplate stamps out.
type MonolithClusterTemplateResource struct {
	// metadata of the MonolithClusters made from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the MonolithClusters made from the template.
	// +required
	Spec MonolithClusterSpec `json:"spec"`
}

// MonolithClusterTemplate is a template of MonolithClusters, for ClusterClasses.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=monolithclustertemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type MonolithClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MonolithClusterTemplateSpec `json:"spec,omitempty"`
}

// MonolithClusterTemplateList is a list of MonolithClusterTemplates.
//
// +kubebuilder:object:root=true
type MonolithClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MonolithClusterTemplate `json:"items"`
}

func init() {
	schemeBuilder.Register(&MonolithCluster{}, &MonolithClusterList{}, &MonolithClusterTemplate{}, &MonolithClusterTemplateList{})
}
