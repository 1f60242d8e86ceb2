// Package variables defines the ClusterClass variables the runtime extension
// discovers (DiscoverVariables), patches templates from (GeneratePatches) and
// reads policies from (the IP capacity gate, upgrade plans): their names,
// OpenAPI schemas and defaults, and typed readers over a Cluster's topology.
package variables

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	ipamv1alpha1 "github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
)

// Variable names. They are prefixed so that they never collide with the
// inline variables of a ClusterClass.
const (
	// Backend is "docker" or "inmemory" (default): the backend of the
	// MonolithCluster and of every MonolithMachine/MonolithMachinePool.
	Backend = "monolithBackend"
	// NodeImage is the docker backend's node image; empty keeps the
	// default (kindest/node:<version>). Only valid with the docker backend.
	NodeImage = "monolithNodeImage"
	// LoadBalancerImage is the docker backend's load balancer image; empty
	// keeps the default. Only valid with the docker backend.
	LoadBalancerImage = "monolithLoadBalancerImage"
	// AddressPools lists the IP pools each machine takes one address from
	// (MonolithMachine spec.addressesFromPools). Can be overridden per
	// control plane, machine deployment or machine pool.
	AddressPools = "monolithAddressPools"
	// UpgradeVersions lists Kubernetes versions GenerateUpgradePlan may use
	// as intermediate steps, one per minor at least.
	UpgradeVersions = "monolithUpgradeVersions"
)

// Backend values.
const (
	BackendDocker   = "docker"
	BackendInMemory = "inmemory"
)

// PoolRef names an IP pool of the ipam module.
type PoolRef struct {
	// Kind is MonolithIPPool (in the Cluster's namespace) or
	// GlobalMonolithIPPool (cluster-scoped).
	Kind string `json:"kind"`
	// Name of the pool.
	Name string `json:"name"`
}

// Pool kinds an address pool reference may name (ipamv1alpha1.PoolKinds
// lists them all).
const (
	PoolKind       = ipamv1alpha1.MonolithIPPoolKind
	GlobalPoolKind = ipamv1alpha1.GlobalMonolithIPPoolKind
)

// poolKindEnum is the schema enum of a pool reference's kind: every kind of
// the ipam module's one table.
func poolKindEnum() []apiextensionsv1.JSON {
	var enum []apiextensionsv1.JSON
	for _, k := range ipamv1alpha1.PoolKindNames() {
		enum = append(enum, jsonString(k))
	}
	return enum
}

func (p PoolRef) String() string { return p.Kind + "/" + p.Name }

// Definitions are the variables DiscoverVariables answers with, in a fixed
// order.
func Definitions() []clusterv1.ClusterClassVariable {
	str := func(maxLen int64, desc string) clusterv1.JSONSchemaProps {
		return clusterv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To(maxLen), Description: desc}
	}
	return []clusterv1.ClusterClassVariable{
		{
			Name:     Backend,
			Required: ptr.To(false),
			Schema: clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{
				Type:        "string",
				Description: "Backend of the MonolithCluster and its machines: docker (real containers) or inmemory (simulated).",
				Enum:        []apiextensionsv1.JSON{jsonString(BackendDocker), jsonString(BackendInMemory)},
				Default:     ptr.To(jsonString(BackendInMemory)),
			}},
		},
		{
			Name:     NodeImage,
			Required: ptr.To(false),
			Schema: clusterv1.VariableSchema{OpenAPIV3Schema: str(512,
				"Node image of docker machines; empty keeps kindest/node:<Machine version>. Docker backend only.")},
		},
		{
			Name:     LoadBalancerImage,
			Required: ptr.To(false),
			Schema: clusterv1.VariableSchema{OpenAPIV3Schema: str(512,
				"Load balancer image of a docker cluster; empty keeps the provider's default. Docker backend only.")},
		},
		{
			Name:     AddressPools,
			Required: ptr.To(false),
			Schema: clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{
				Type:        "array",
				Description: "IP pools each machine takes one address from. Overridable per control plane, machine deployment and machine pool.",
				MaxItems:    ptr.To[int64](16),
				Items: &clusterv1.JSONSchemaProps{
					Type:     "object",
					Required: []string{"kind", "name"},
					Properties: map[string]clusterv1.JSONSchemaProps{
						"kind": {
							Type: "string",
							Enum: poolKindEnum(),
						},
						"name": {Type: "string", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](253)},
					},
				},
			}},
		},
		{
			Name:     UpgradeVersions,
			Required: ptr.To(false),
			Schema: clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{
				Type:        "array",
				Description: "Kubernetes versions GenerateUpgradePlan may step through, e.g. [v1.34.3, v1.35.1]; the highest patch of each minor is used.",
				MaxItems:    ptr.To[int64](64),
				Items: &clusterv1.JSONSchemaProps{
					Type:    "string",
					Pattern: `^v?\d+\.\d+\.\d+([-+].*)?$`,
				},
			}},
		},
	}
}

func jsonString(s string) apiextensionsv1.JSON {
	b, _ := json.Marshal(s)
	return apiextensionsv1.JSON{Raw: b}
}

// Decode reads variable name of vars into out; found is false when it is
// not set.
func Decode(vars []clusterv1.ClusterVariable, name string, out any) (found bool, err error) {
	for _, v := range vars {
		if v.Name != name {
			continue
		}
		if err := json.Unmarshal(v.Value.Raw, out); err != nil {
			return true, fmt.Errorf("variable %s: %w", name, err)
		}
		return true, nil
	}
	return false, nil
}

// DecodeWithOverrides reads variable name from overrides first, then from the
// cluster-level vars.
func DecodeWithOverrides(vars, overrides []clusterv1.ClusterVariable, name string, out any) (bool, error) {
	if found, err := Decode(overrides, name, out); found || err != nil {
		return found, err
	}
	return Decode(vars, name, out)
}

// PoolDemand is how many addresses a Cluster's topology asks from one pool.
type PoolDemand struct {
	Pool PoolRef
	// Addresses is one per machine taking an address from the pool; a
	// topology without replicas counts as one machine.
	Addresses int64
}

// AddressDemand sums, per pool, the addresses the machines of a Cluster's
// topology take: control plane, machine deployments and machine pools, with
// their variable overrides. The result is ordered by first appearance.
func AddressDemand(topology clusterv1.Topology) ([]PoolDemand, error) {
	var order []PoolRef
	demand := map[PoolRef]int64{}
	add := func(overrides []clusterv1.ClusterVariable, replicas *int32, what string) error {
		var pools []PoolRef
		if _, err := DecodeWithOverrides(topology.Variables, overrides, AddressPools, &pools); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		n := int64(ptr.Deref(replicas, 1))
		for _, p := range pools {
			if _, ok := demand[p]; !ok {
				order = append(order, p)
			}
			demand[p] += n
		}
		return nil
	}
	if err := add(topology.ControlPlane.Variables.Overrides, topology.ControlPlane.Replicas, "control plane"); err != nil {
		return nil, err
	}
	for _, md := range topology.Workers.MachineDeployments {
		if err := add(md.Variables.Overrides, md.Replicas, "machine deployment "+md.Name); err != nil {
			return nil, err
		}
	}
	for _, mp := range topology.Workers.MachinePools {
		if err := add(mp.Variables.Overrides, mp.Replicas, "machine pool "+mp.Name); err != nil {
			return nil, err
		}
	}
	out := make([]PoolDemand, 0, len(order))
	for _, p := range order {
		out = append(out, PoolDemand{Pool: p, Addresses: demand[p]})
	}
	return out, nil
}
