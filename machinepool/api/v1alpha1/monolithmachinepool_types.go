package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// Names the machinepool module writes on its objects and on the
// MonolithMachines of its instances.
const (
	// PoolFinalizer lets the module delete a pool's instances before the
	// MonolithMachinePool goes.
	PoolFinalizer = "monolithmachinepool.infrastructure.cluster.x-k8s.io"
	// InstanceFinalizer was set on instances by releases that had a second
	// MonolithMachine controller for them. Infra's one machine controller
	// (whose finalizer instances now carry) removes it from stored objects.
	//
	// Deprecated: no longer set.
	InstanceFinalizer = "monolithmachinepool.infrastructure.cluster.x-k8s.io/instance"

	// TemplateHashAnnotation records, on an instance's MonolithMachine, the
	// hash of the pool template and Kubernetes version it was made from;
	// an instance whose hash differs from the pool's is outdated.
	TemplateHashAnnotation = "monolithmachinepool.infrastructure.cluster.x-k8s.io/template-hash"
	// VersionAnnotation records the Kubernetes version an instance was
	// made for (the MachinePool's when it was created).
	VersionAnnotation = "monolithmachinepool.infrastructure.cluster.x-k8s.io/version"

	// InfrastructureMachineKind is the kind of the instances' objects, as
	// status.infrastructureMachineKind tells Cluster API.
	InfrastructureMachineKind = "MonolithMachine"
)

// Condition types and reasons of MonolithMachinePools; instances use the
// infra module's machine conditions (infrav1.BackendMachineProvisioned...).
const (
	// InstancesReadyCondition is True when the pool has exactly the desired
	// number of instances, all ready and made from the current template.
	InstancesReadyCondition = "InstancesReady"

	// WaitingForMachinePoolReason: Cluster API has not set the owner
	// MachinePool yet.
	WaitingForMachinePoolReason = "WaitingForMachinePool"
	// ScalingUpReason, ScalingDownReason and RollingOutReason: instances
	// are being added, removed or replaced.
	ScalingUpReason   = "ScalingUp"
	ScalingDownReason = "ScalingDown"
	RollingOutReason  = "RollingOut"
	// WaitingForInstancesReason: instances exist but are not ready yet.
	WaitingForInstancesReason = "WaitingForInstances"
	// InstancesReadyReason: desired up-to-date instances, all ready.
	InstancesReadyReason = "InstancesReady"
	// InvalidConfigurationReason is the InstancesReady reason of a pool
	// that cannot work as specified (e.g. a backend its cluster does not
	// use): a terminal failure, until the spec changes.
	InvalidConfigurationReason = "InvalidConfiguration"
)

// Defaults of the rolling replacement.
const (
	DefaultMaxSurge       int32 = 1
	DefaultMaxUnavailable int32 = 0
)

// MonolithMachinePoolSpec is the desired state of a MonolithMachinePool.
type MonolithMachinePoolSpec struct {
	// providerID identifies the pool itself (informational):
	// monolith-pool:///<namespace>/<name>, set by the module.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	ProviderID string `json:"providerID,omitempty"`

	// providerIDList is the provider ID of every instance that exists,
	// sorted; the module keeps it exact.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	ProviderIDList []string `json:"providerIDList,omitempty"`

	// template of every instance. Changing it replaces the instances,
	// rolling, as strategy allows.
	// +required
	Template InstanceTemplate `json:"template"`

	// strategy bounds the rolling replacement of outdated instances.
	// +optional
	Strategy RollingUpdate `json:"strategy,omitempty,omitzero"`
}

// InstanceTemplate is what each instance of a pool is made from.
type InstanceTemplate struct {
	// backend that provisions the instances: exactly one of docker or
	// inMemory, the same as the cluster's. A docker instance without an
	// image runs <node image repository>:<MachinePool version>.
	// +required
	Backend infrav1.MachineBackend `json:"backend"`

	// addressesFromPools asks one address of each IP pool for every
	// instance, claimed as for a single MonolithMachine
	// (<instance>-<index>).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AddressesFromPools []corev1.TypedLocalObjectReference `json:"addressesFromPools,omitempty"`
}

// RollingUpdate bounds how outdated instances are replaced.
type RollingUpdate struct {
	// maxSurge is how many instances may exist above the desired number
	// while outdated ones are replaced. Default 1.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxSurge *int32 `json:"maxSurge,omitempty"`
	// maxUnavailable is how many fewer ready instances than desired the
	// replacement may leave. Default 0. maxSurge and maxUnavailable are
	// not both 0.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
}

// MonolithMachinePoolStatus is the observed state of a MonolithMachinePool.
type MonolithMachinePoolStatus struct {
	// ready is true once the pool first had the desired instances (Cluster
	// API v1.14 reads it for MachinePools); it stays true.
	// +optional
	Ready bool `json:"ready"`

	// initialization.provisioned mirrors ready (contract v1beta2).
	// +optional
	Initialization infrav1.Initialization `json:"initialization,omitempty,omitzero"`

	// replicas is the number of instances that exist (those in
	// spec.providerIDList).
	// +optional
	Replicas int32 `json:"replicas"`

	// instances reports every instance.
	// +listType=map
	// +listMapKey=instanceName
	// +kubebuilder:validation:MaxItems=10000
	// +optional
	Instances []InstanceStatus `json:"instances,omitempty"`

	// infrastructureMachineKind is MonolithMachine: every instance is a
	// MonolithMachine, and Cluster API makes a Machine for each
	// (MachinePool Machines).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	InfrastructureMachineKind string `json:"infrastructureMachineKind,omitempty"`

	// conditions: Ready (summary), Paused, InstancesReady. A terminal
	// problem, one that needs the spec changed, is InstancesReady=False
	// with reason InvalidConfiguration (contract v1beta2: no
	// failureReason/failureMessage, which Cluster API v1.14.2 core's
	// MachinePool code does not survive).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// InstanceStatus is what the pool knows of one instance.
type InstanceStatus struct {
	// instanceName is the name of the instance and of its MonolithMachine.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	InstanceName string `json:"instanceName"`
	// providerID of the instance's node, once it exists.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	ProviderID *string `json:"providerID,omitempty"`
	// addresses of the instance's node.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Addresses []clusterv1.MachineAddress `json:"addresses,omitempty"`
	// version is the Kubernetes version the instance was made for.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Version *string `json:"version,omitempty"`
	// ready is true once the node exists and its bootstrap data ran.
	// +optional
	Ready bool `json:"ready"`
}

// MonolithMachinePool is Cluster API's infrastructure machine pool of
// capi-monolith.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=monolithmachinepools,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster"
// +kubebuilder:printcolumn:name="MachinePool",type="string",JSONPath=".metadata.ownerReferences[?(@.kind==\"MachinePool\")].name",description="MachinePool"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="Instances that exist"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Pool provisioned"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type MonolithMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MonolithMachinePoolSpec   `json:"spec,omitempty"`
	Status MonolithMachinePoolStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions.
func (p *MonolithMachinePool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the conditions.
func (p *MonolithMachinePool) SetConditions(conds []metav1.Condition) { p.Status.Conditions = conds }

// MonolithMachinePoolList is a list of MonolithMachinePools.
//
// +kubebuilder:object:root=true
type MonolithMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MonolithMachinePool `json:"items"`
}

// MonolithMachinePoolTemplateSpec is the spec of a MonolithMachinePoolTemplate.
type MonolithMachinePoolTemplateSpec struct {
	// template of the MonolithMachinePools made from it.
	// +required
	Template MonolithMachinePoolTemplateResource `json:"template"`
}

// MonolithMachinePoolTemplateResource is what a MonolithMachinePoolTemplate
// stamps out.
type MonolithMachinePoolTemplateResource struct {
	// metadata of the MonolithMachinePools made from the template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// spec of the MonolithMachinePools made from the template.
	// +required
	Spec MonolithMachinePoolSpec `json:"spec"`
}

// MonolithMachinePoolTemplate is a template of MonolithMachinePools, for
// ClusterClasses.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=monolithmachinepooltemplates,scope=Namespaced,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type MonolithMachinePoolTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MonolithMachinePoolTemplateSpec `json:"spec,omitempty"`
}

// MonolithMachinePoolTemplateList is a list of MonolithMachinePoolTemplates.
//
// +kubebuilder:object:root=true
type MonolithMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MonolithMachinePoolTemplate `json:"items"`
}

func init() {
	schemeBuilder.Register(&MonolithMachinePool{}, &MonolithMachinePoolList{},
		&MonolithMachinePoolTemplate{}, &MonolithMachinePoolTemplateList{})
}
