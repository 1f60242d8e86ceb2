package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"

	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/topologymutation"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	mpv1 "github.com/capi-monolith/capi-monolith/machinepool/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/record"
	"github.com/capi-monolith/capi-monolith/runtimeext/internal/variables"
)

// ipamGroup is the API group of the ipam module's pools.
const ipamGroup = "ipam.cluster.x-k8s.io"

// Handlers answer the topology mutation hooks.
type Handlers struct {
	// Recorder records every call; nil records nothing.
	Recorder *record.Recorder

	decoder runtime.Decoder
}

// New returns the handlers, with a decoder for our template kinds.
func New(rec *record.Recorder) (*Handlers, error) {
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to build the template scheme: %w", err)
	}
	if err := mpv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("failed to build the template scheme: %w", err)
	}
	return &Handlers{Recorder: rec, decoder: serializer.NewCodecFactory(scheme).UniversalDecoder(infrav1.GroupVersion)}, nil
}

// DiscoverVariables answers the variables of package variables.
func (h *Handlers) DiscoverVariables(_ context.Context, _ *runtimehooksv1.DiscoverVariablesRequest, resp *runtimehooksv1.DiscoverVariablesResponse) {
	start := time.Now()
	resp.Variables = variables.Definitions()
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
	h.Recorder.Call("DiscoverVariables", nil, resp, start)
}

// GeneratePatches patches our templates from the variables. Templates of
// other kinds are left alone.
func (h *Handlers) GeneratePatches(ctx context.Context, req *runtimehooksv1.GeneratePatchesRequest, resp *runtimehooksv1.GeneratePatchesResponse) {
	start := time.Now()
	topologymutation.WalkTemplates(ctx, h.decoder, req, resp, mutate)
	h.Recorder.Call("GeneratePatches", nil, resp, start)
}

type values struct {
	backend           string
	nodeImage         string
	loadBalancerImage string
	pools             []variables.PoolRef
	poolsSet          bool
}

func readValues(vars map[string]apiextensionsv1.JSON) (values, error) {
	v := values{backend: variables.BackendInMemory}
	var errs []error
	str := func(name string, into *string) {
		s, err := topologymutation.GetStringVariable(vars, name)
		if err != nil && !topologymutation.IsNotFoundError(err) {
			errs = append(errs, fmt.Errorf("variable %s: %w", name, err))
		} else if err == nil {
			*into = s
		}
	}
	str(variables.Backend, &v.backend)
	str(variables.NodeImage, &v.nodeImage)
	str(variables.LoadBalancerImage, &v.loadBalancerImage)
	if err := topologymutation.GetObjectVariableInto(vars, variables.AddressPools, &v.pools); err == nil {
		v.poolsSet = true
	} else if !topologymutation.IsNotFoundError(err) {
		errs = append(errs, fmt.Errorf("variable %s: %w", variables.AddressPools, err))
	}
	if v.backend != variables.BackendDocker && v.backend != variables.BackendInMemory {
		errs = append(errs, fmt.Errorf("variable %s must be %s or %s, got %q", variables.Backend, variables.BackendDocker, variables.BackendInMemory, v.backend))
	}
	return v, errors.Join(errs...)
}

func mutate(_ context.Context, obj runtime.Object, vars map[string]apiextensionsv1.JSON, _ runtimehooksv1.HolderReference) error {
	v, err := readValues(vars)
	if err != nil {
		return err
	}
	switch t := obj.(type) {
	case *infrav1.MonolithClusterTemplate:
		b := &t.Spec.Template.Spec.Backend
		if v.backend == variables.BackendDocker {
			d := ptr.Deref(b.Docker, infrav1.DockerClusterBackend{})
			if v.loadBalancerImage != "" {
				d.LoadBalancerImage = v.loadBalancerImage
			}
			*b = infrav1.ClusterBackend{Docker: &d}
		} else {
			*b = infrav1.ClusterBackend{InMemory: ptr.To(ptr.Deref(b.InMemory, infrav1.InMemoryClusterBackend{}))}
		}
	case *infrav1.MonolithMachineTemplate:
		spec := &t.Spec.Template.Spec
		spec.Backend = v.machineBackend(spec.Backend)
		if v.poolsSet {
			spec.AddressesFromPools = poolRefs(v.pools)
		}
	case *mpv1.MonolithMachinePoolTemplate:
		instance := &t.Spec.Template.Spec.Template
		instance.Backend = v.machineBackend(instance.Backend)
		if v.poolsSet {
			instance.AddressesFromPools = poolRefs(v.pools)
		}
	}
	return nil
}

// machineBackend is b switched to the chosen backend, keeping the settings
// the template already had for it.
func (v values) machineBackend(b infrav1.MachineBackend) infrav1.MachineBackend {
	if v.backend == variables.BackendDocker {
		d := ptr.Deref(b.Docker, infrav1.DockerMachineBackend{})
		if v.nodeImage != "" {
			d.Image = v.nodeImage
		}
		return infrav1.MachineBackend{Docker: &d}
	}
	return infrav1.MachineBackend{InMemory: ptr.To(ptr.Deref(b.InMemory, infrav1.InMemoryMachineBackend{}))}
}

func poolRefs(pools []variables.PoolRef) []corev1.TypedLocalObjectReference {
	if len(pools) == 0 {
		return nil
	}
	out := make([]corev1.TypedLocalObjectReference, 0, len(pools))
	for _, p := range pools {
		out = append(out, corev1.TypedLocalObjectReference{APIGroup: ptr.To(ipamGroup), Kind: p.Kind, Name: p.Name})
	}
	return out
}

// ValidateTopology rejects variables that contradict each other and
// objects whose backend differs from the cluster's. Every problem is
// reported, in a stable order.
func (h *Handlers) ValidateTopology(_ context.Context, req *runtimehooksv1.ValidateTopologyRequest, resp *runtimehooksv1.ValidateTopologyResponse) {
	start := time.Now()
	defer func() { h.Recorder.Call("ValidateTopology", nil, resp, start) }()
	problems := map[string]bool{}
	global := topologymutation.ToMap(req.Variables)
	for _, item := range req.Items {
		if item == nil {
			continue
		}
		vars, err := topologymutation.MergeVariableMaps(global, topologymutation.ToMap(item.Variables))
		if err != nil {
			problems[err.Error()] = true
			continue
		}
		v, err := readValues(vars)
		if err != nil {
			problems[err.Error()] = true
			continue
		}
		if v.backend == variables.BackendInMemory {
			if v.nodeImage != "" {
				problems[fmt.Sprintf("%s is set but %s is %s: node images apply to the docker backend only", variables.NodeImage, variables.Backend, v.backend)] = true
			}
			if v.loadBalancerImage != "" {
				problems[fmt.Sprintf("%s is set but %s is %s: load balancer images apply to the docker backend only", variables.LoadBalancerImage, variables.Backend, v.backend)] = true
			}
		}
		seen := map[variables.PoolRef]bool{}
		for _, p := range v.pools {
			if p.Kind != variables.PoolKind && p.Kind != variables.GlobalPoolKind {
				problems[fmt.Sprintf("%s: pool %s must be of kind %s or %s", variables.AddressPools, p, variables.PoolKind, variables.GlobalPoolKind)] = true
			}
			if seen[p] {
				problems[fmt.Sprintf("%s: pool %s is listed twice", variables.AddressPools, p)] = true
			}
			seen[p] = true
		}
		if msg := h.backendMismatch(item, v.backend); msg != "" {
			problems[msg] = true
		}
	}
	if len(problems) == 0 {
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		return
	}
	msgs := make([]string, 0, len(problems))
	for m := range problems {
		msgs = append(msgs, m)
	}
	slices.Sort(msgs)
	resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
	resp.SetMessage("invalid topology: " + strings.Join(msgs, "; "))
}

// backendMismatch reports an object of ours whose backend is not the one the
// variables ask for (e.g. a template patched by another patch).
func (h *Handlers) backendMismatch(item *runtimehooksv1.ValidateTopologyRequestItem, backend string) string {
	obj, _, err := h.decoder.Decode(item.Object.Raw, nil, nil)
	if err != nil {
		return ""
	}
	var got string
	var kind string
	switch t := obj.(type) {
	case *infrav1.MonolithCluster:
		kind, got = "MonolithCluster", clusterBackend(t.Spec.Backend)
	case *infrav1.MonolithMachineTemplate:
		kind, got = "MonolithMachineTemplate", machineBackend(t.Spec.Template.Spec.Backend)
	case *infrav1.MonolithMachine:
		kind, got = "MonolithMachine", machineBackend(t.Spec.Backend)
	case *mpv1.MonolithMachinePoolTemplate:
		kind, got = "MonolithMachinePoolTemplate", machineBackend(t.Spec.Template.Spec.Template.Backend)
	case *mpv1.MonolithMachinePool:
		kind, got = "MonolithMachinePool", machineBackend(t.Spec.Template.Backend)
	default:
		return ""
	}
	if got != "" && got != backend {
		return fmt.Sprintf("%s of %s %s has backend %s but %s is %s",
			kind, item.HolderReference.Kind, item.HolderReference.Name, got, variables.Backend, backend)
	}
	return ""
}

func clusterBackend(b infrav1.ClusterBackend) string {
	switch {
	case b.Docker != nil:
		return variables.BackendDocker
	case b.InMemory != nil:
		return variables.BackendInMemory
	}
	return ""
}

func machineBackend(b infrav1.MachineBackend) string {
	switch {
	case b.Docker != nil:
		return variables.BackendDocker
	case b.InMemory != nil:
		return variables.BackendInMemory
	}
	return ""
}
