package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// MonolithMachineSpec is the desired state of a MonolithMachine.
type MonolithMachineSpec struct {
	// providerID is set by the infra module once the node exists:
	// docker:////<container> or inmemory://<namespace>/<name>.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	ProviderID string `json:"providerID,omitempty"`

	// failureDomain the machine is placed in when its Machine names none:
	// Cluster API v1.14 sets the Machine's spec.failureDomain, not this
	// field, and the Machine's wins; MachinePool instances get theirs here.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	FailureDomain string `json:"failureDomain,omitempty"`

	// backend that provisions the node: exactly one of docker or inMemory,
	// the same as the cluster's.
	// +required
	Backend MachineBackend `json:"backend"`

	// addressesFromPools asks one address of each IP pool (in the machine's
	// namespace, or a global pool) for the node. The infra module creates an
	// IPAddressClaim per pool, named <machine>-<index>, and waits for it.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AddressesFromPools []corev1.TypedLocalObjectReference `json:"addressesFromPools,omitempty"`
}

// MachineBackend picks the backend of a machine.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:MaxProperties=1
type MachineBackend struct {
	// docker runs the node as a container on the Docker Engine.
	// +optional
	Docker *DockerMachineBackend `json:"docker,omitempty"`
	// inMemory simulates the node.
	// +optional
	InMemory *InMemoryMachineBackend `json:"inMemory,omitempty"`
}

// DockerMachineBackend configures the docker backend of a machine.
type DockerMachineBackend struct {
	// image of the node container. Default "kindest/node:<Machine version>".
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`
}

// InMemoryMachineBackend configures the inMemory backend of a machine.
type InMemoryMachineBackend struct {
	// provisioningDelay simulates how long the node takes to exist; at most
	// one hour.
	// +optional
	ProvisioningDelay *metav1.Duration `json:"provisioningDelay,omitempty"`
	// bootstrapDelay simulates how long the bootstrap data takes to run; at
	// most one hour.
	// +optional
	BootstrapDelay *metav1.Duration `json:"bootstrapDelay,omitempty"`
}

// MonolithMachineStatus is the observed state of a MonolithMachine.
type MonolithMachineStatus struct {
	// initialization reports when the node is provisioned.
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`

	// failureDomain the node is placed in: the owning Machine's
	// spec.failureDomain (a MachinePool instance's own spec.failureDomain)
	// as the backend recorded it. Cluster API copies it to the Machine's
	// status.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	FailureDomain string `json:"failureDomain,omitempty"`

	// addresses of the node.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`

	// bootstrap reports the run of the bootstrap data on the node.
	// +optional
	Bootstrap MonolithMachineBootstrapStatus `json:"bootstrap,omitempty,omitzero"`

	// workloadNode reports what the provider did to the machine's Node in
	// the workload cluster (docker backend: the provider ID a kubelet of a
	// kind node image does not set).
	// +optional
	WorkloadNode MonolithMachineWorkloadNodeStatus `json:"workloadNode,omitempty,omitzero"`

	// conditions: Ready (summary), Paused, BackendMachineProvisioned,
	// BootstrapExecSucceeded, IPAddressesClaimed, WorkloadNodeProviderIDSet.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MonolithMachineBootstrapStatus reports the run of a machine's bootstrap
// data on its node.
// +kubebuilder:validation:MinProperties=1
type MonolithMachineBootstrapStatus struct {
	// succeeded is true once the bootstrap data ran to its end on the node.
	// It is never run again after that; the BootstrapExecSucceeded condition
	// says how a run not yet succeeded stands.
	// +optional
	Succeeded *bool `json:"succeeded,omitempty"`
}

// MonolithMachineWorkloadNodeStatus reports what the provider did to the
// machine's Node in the workload cluster.
// +kubebuilder:validation:MinProperties=1
type MonolithMachineWorkloadNodeStatus struct {
	// providerIDSet is true once the Node carries the machine's
	// spec.providerID; the provider then no longer reads the workload
	// cluster. The WorkloadNodeProviderIDSet condition says why not yet.
	// +optional
	ProviderIDSet *bool `json:"providerIDSet,omitempty"`

	// providerIDStartTime is when the provider first tried to set the
	// Node's provider ID. While it has not succeeded, the provider looks at
	// the workload cluster again after as long as it has waited since
	// then, within bounds.
	// +optional
	ProviderIDStartTime metav1.Time `json:"providerIDStartTime,omitempty,omitzero"`
}

// MonolithMachine is Cluster API's infrastructure machine of capi-monolith.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=monolithmachines,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=".metadata.ownerReferences[?(@.kind==\"Machine\")].name",description="Machine"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",description="Provider ID"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Node provisioned"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type MonolithMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MonolithMachineSpec   `json:"spec,omitempty"`
	Status MonolithMachineStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions.
func (m *MonolithMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions sets the conditions.
func (m *MonolithMachine) SetConditions(conds []metav1.Condition) { m.Status.Conditions = conds }

// MonolithMachineList is a list of MonolithMachines.
//
// +kubebuilder:object:root=true
type MonolithMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MonolithMachine `json:"items"`
}

// MonolithMachineTemplateSpec is the spec of a MonolithMachineTemplate.
type MonolithMachineTemplateSpec struct {
	// template of the MonolithMachines made from it.
	// +required
	Template MonolithMachineTemplateResource `json:"template"`
}

// MonolithMachineTemplateResource is what a MonolithMachineTemplate stamps out.
type MonolithMachineTemplateResource struct {
	// metadata of the MonolithMachines made from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the MonolithMachines made from the template.
	// +required
	Spec MonolithMachineSpec `json:"spec"`
}

// MonolithMachineTemplate is a template of MonolithMachines.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=monolithmachinetemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type MonolithMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MonolithMachineTemplateSpec `json:"spec,omitempty"`
}

// MonolithMachineTemplateList is a list of MonolithMachineTemplates.
//
// +kubebuilder:object:root=true
type MonolithMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MonolithMachineTemplate `json:"items"`
}

func init() {
	schemeBuilder.Register(&MonolithMachine{}, &MonolithMachineList{}, &MonolithMachineTemplate{}, &MonolithMachineTemplateList{})
}
