package webhooks

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

var (
	specPath         = field.NewPath("spec")
	templateSpecPath = specPath.Child("template", "spec")
)

// Backend kinds, as the spec spells them.
const (
	dockerBackend   = "docker"
	inMemoryBackend = "inMemory"
)

// dockerNetworkName is what every Docker Engine version accepts as a name:
// the container name pattern (later versions accept more, older fewer).
var dockerNetworkName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

func defaultClusterSpec(spec *v1alpha1.MonolithClusterSpec) {
	if d := spec.Backend.Docker; d != nil {
		if d.Network == "" {
			d.Network = v1alpha1.DefaultDockerNetwork
		}
		if d.LoadBalancerImage == "" {
			d.LoadBalancerImage = v1alpha1.DefaultDockerLoadBalancerImage
		}
	}
	if m := spec.Backend.InMemory; m != nil && m.NodeCIDR == "" {
		m.NodeCIDR = v1alpha1.DefaultInMemoryNodeCIDR
	}
}

// clusterBackendKind returns "docker" or "inMemory", or "" unless exactly
// one is set.
func clusterBackendKind(b *v1alpha1.ClusterBackend) string {
	return backendKind(b.Docker != nil, b.InMemory != nil)
}

func backendKind(docker, inMemory bool) string {
	switch {
	case docker && !inMemory:
		return dockerBackend
	case inMemory && !docker:
		return inMemoryBackend
	}
	return ""
}

// validateBackendChoice reports a backend that is not exactly one of
// docker or inMemory. The CRD says the same (one property), for servers
// where the schema was not applied and for direct callers.
func validateBackendChoice(docker, inMemory bool, path *field.Path) field.ErrorList {
	switch {
	case docker && inMemory:
		return field.ErrorList{field.Invalid(path, "docker, inMemory", "exactly one of docker or inMemory must be set, not both")}
	case !docker && !inMemory:
		return field.ErrorList{field.Required(path, "exactly one of docker or inMemory must be set")}
	}
	return nil
}

// validateClusterSpec reports every problem of a cluster spec found at path
// (spec, or spec.template.spec).
func validateClusterSpec(spec *v1alpha1.MonolithClusterSpec, path *field.Path) field.ErrorList {
	backendPath := path.Child("backend")
	errs := validateBackendChoice(spec.Backend.Docker != nil, spec.Backend.InMemory != nil, backendPath)
	errs = append(errs, validateEndpoint(spec.ControlPlaneEndpoint, path.Child("controlPlaneEndpoint"))...)
	if d := spec.Backend.Docker; d != nil {
		p := backendPath.Child("docker")
		switch {
		case d.Network != "" && !dockerNetworkName.MatchString(d.Network):
			errs = append(errs, field.Invalid(p.Child("network"), d.Network,
				"must be a Docker network name: a letter or digit, then letters, digits, '_', '.' or '-'"))
		case v1alpha1.IsReservedDockerNetwork(d.Network):
			errs = append(errs, field.Invalid(p.Child("network"), d.Network,
				"must not be one of Docker's predefined networks ("+strings.Join(v1alpha1.ReservedDockerNetworks, ", ")+"): nodes on host would share the host's network namespace"))
		}
		if d.LoadBalancerHostPort < 0 || d.LoadBalancerHostPort > 65535 {
			errs = append(errs, field.Invalid(p.Child("loadBalancerHostPort"), d.LoadBalancerHostPort,
				"must be between 0 and 65535 (0 picks a free port)"))
		}
	}
	if m := spec.Backend.InMemory; m != nil && m.NodeCIDR != "" {
		if msg := nodeCIDRProblem(m.NodeCIDR); msg != "" {
			errs = append(errs, field.Invalid(backendPath.Child("inMemory", "nodeCIDR"), m.NodeCIDR, msg))
		}
	}
	errs = append(errs, validateFailureDomains(spec.FailureDomains, path.Child("failureDomains"))...)
	return errs
}

// validateEndpoint accepts an empty endpoint (the backend chooses one) or
// a host and a port.
func validateEndpoint(ep clusterv1.APIEndpoint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	portOK := ep.Port >= 0 && ep.Port <= 65535
	if !portOK {
		errs = append(errs, field.Invalid(path.Child("port"), ep.Port, "must be between 1 and 65535, or 0 with an empty host to let the backend choose"))
	}
	switch {
	case ep.Host == "" && ep.Port != 0 && portOK:
		errs = append(errs, field.Required(path.Child("host"), "a host is required with a port; leave both empty to let the backend choose the endpoint"))
	case ep.Host != "" && ep.Port == 0:
		errs = append(errs, field.Required(path.Child("port"), "a port is required with a host; leave both empty to let the backend choose the endpoint"))
	}
	if ep.Host != "" {
		if msg := hostProblem(ep.Host); msg != "" {
			errs = append(errs, field.Invalid(path.Child("host"), ep.Host, msg))
		}
	}
	return errs
}

// hostProblem says why host is neither an IP address nor a DNS name, or "".
func hostProblem(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	if len(validation.IsDNS1123Subdomain(host)) == 0 {
		return ""
	}
	return "must be an IP address or a DNS-1123 subdomain (lower case letters, digits, '-' and '.', " +
		"starting and ending with a letter or digit, at most 253 characters)"
}

// nodeCIDRProblem says why cidr cannot hold the inMemory backend's nodes,
// or "". The backend gives the first address to the load balancer and
// nodes the addresses between it and the last one: a /30 (IPv4) or a /126
// (IPv6) holds one node.
func nodeCIDRProblem(cidr string) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "must be a CIDR such as " + v1alpha1.DefaultInMemoryNodeCIDR
	}
	if maxBits := p.Addr().BitLen() - 2; p.Bits() > maxBits {
		return fmt.Sprintf("leaves no address for a node: the prefix length must be at most %d for IPv%d", maxBits, map[bool]int{true: 4, false: 6}[p.Addr().Is4()])
	}
	return ""
}

// validateFailureDomains reports empty and repeated names, and a network
// attribute that is no Docker network name. The CRD's list
// map says the same, for servers where the schema was not applied and for
// direct callers.
func validateFailureDomains(fds []clusterv1.FailureDomain, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[string]bool, len(fds))
	for i, fd := range fds {
		p := path.Index(i).Child("name")
		switch {
		case fd.Name == "":
			errs = append(errs, field.Required(p, "a failure domain needs a name"))
		case seen[fd.Name]:
			errs = append(errs, field.Duplicate(p, fd.Name))
		}
		seen[fd.Name] = true
		if n, ok := fd.Attributes[v1alpha1.FailureDomainNetworkAttribute]; ok && !dockerNetworkName.MatchString(n) {
			errs = append(errs, field.Invalid(path.Index(i).Child("attributes").Key(v1alpha1.FailureDomainNetworkAttribute), n,
				"must be a Docker network name: a letter or digit, then letters, digits, '_', '.' or '-'"))
		}
	}
	return errs
}

// validateClusterUpdate checks a changed spec like a new one, and that it
// keeps the backend kind and an endpoint once set.
func validateClusterUpdate(oldSpec, spec *v1alpha1.MonolithClusterSpec) field.ErrorList {
	// The spec may have been stored without the defaulter: compare with
	// its defaulted form, which this update's defaulting produced too.
	oldSpec = oldSpec.DeepCopy()
	defaultClusterSpec(oldSpec)
	if equality.Semantic.DeepEqual(oldSpec, spec) {
		return nil
	}
	errs := validateClusterSpec(spec, specPath)
	oldKind, kind := clusterBackendKind(&oldSpec.Backend), clusterBackendKind(&spec.Backend)
	if oldKind != "" && kind != "" && oldKind != kind {
		errs = append(errs, field.Forbidden(specPath.Child("backend"), fmt.Sprintf(
			"the backend cannot change from %s to %s; create a new cluster instead", oldKind, kind)))
	}
	if old := oldSpec.ControlPlaneEndpoint; old.IsValid() && spec.ControlPlaneEndpoint != old {
		errs = append(errs, field.Forbidden(specPath.Child("controlPlaneEndpoint"), fmt.Sprintf(
			"cannot change once set; it is %s", net.JoinHostPort(old.Host, strconv.Itoa(int(old.Port))))))
	}
	return errs
}

// validateClusterTemplateUpdate keeps the template's spec, except in the
// topology controller's dry-runs.
func validateClusterTemplateUpdate(ctx context.Context, old, t *v1alpha1.MonolithClusterTemplate) field.ErrorList {
	oldSpec := old.Spec.DeepCopy()
	defaultClusterSpec(&oldSpec.Template.Spec)
	if equality.Semantic.DeepEqual(oldSpec, &t.Spec) {
		return nil
	}
	errs := validateClusterSpec(&t.Spec.Template.Spec, templateSpecPath)
	if !isTopologyDryRun(ctx, t) {
		errs = append(errs, templateImmutable(clusterTemplateKind))
	}
	return errs
}

// checkEndpointFree reports a controlPlaneEndpoint another MonolithCluster
// records already: two clusters naming one endpoint would race for its port
// (the controller serves it only for the first, see workload/hosting). The
// other cluster is named only when it is in the same namespace. Without a
// Client nothing is checked (direct callers, fuzzing).
func (v *Validator) checkEndpointFree(ctx context.Context, mc *v1alpha1.MonolithCluster) (field.ErrorList, error) {
	ep := mc.Spec.ControlPlaneEndpoint
	if !ep.IsValid() || v.Client == nil {
		return nil, nil
	}
	list := &v1alpha1.MonolithClusterList{}
	if err := v.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("failed to list MonolithClusters: %w", err)
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.Spec.ControlPlaneEndpoint != ep || (other.Namespace == mc.Namespace && other.Name == mc.Name) {
			continue
		}
		who := "a MonolithCluster of another namespace"
		if other.Namespace == mc.Namespace {
			who = "MonolithCluster " + other.Name
		}
		return field.ErrorList{field.Forbidden(specPath.Child("controlPlaneEndpoint"), fmt.Sprintf(
			"%s is already recorded by %s", net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port))), who))}, nil
	}
	return nil, nil
}
