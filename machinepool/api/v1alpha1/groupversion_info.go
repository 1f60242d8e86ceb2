// Package v1alpha1 holds the kinds of the machinepool module:
// MonolithMachinePool (Cluster API's InfraMachinePool) and
// MonolithMachinePoolTemplate. They share the infra kinds' group and
// version; each instance of a pool is a MonolithMachine of that group.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1

import (
	"sigs.k8s.io/controller-runtime/pkg/scheme"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

var (
	// GroupVersion is the infra kinds' group version: the pool kinds are
	// registered in the same one.
	GroupVersion = infrav1.GroupVersion

	// schemeBuilder is used to add go types to the GroupVersionKind scheme.
	schemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
