package controllers

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// The node port range, kube-apiserver's --service-node-port-range default.
const (
	nodePortFirst = 30000
	nodePortLast  = 32767
)

// EndpointSlice labels of the EndpointSlice controller.
const (
	managedByLabel      = discoveryv1.LabelManagedBy
	managedByController = "endpointslice-controller.k8s.io"
)

// reconcileService gives a Service what kube-apiserver's Service registry
// gives it at creation (defaults, a cluster IP from the service CIDR unless
// headless, node ports for NodePort and LoadBalancer Services), and keeps
// its Endpoints and EndpointSlice listing the Pods its selector selects,
// as the endpoints and EndpointSlice controllers do. Endpoints of a
// Service that is gone are deleted; its EndpointSlice is the garbage
// collector's (it is owned by the Service).
func (c *Cluster) reconcileService(namespace, name string) error {
	u, err := c.store.Get(services, namespace, name)
	if isGone(err) {
		if ep, err := c.store.Get(endpoints, namespace, name); err == nil {
			return c.deleteObject(endpoints, ep)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if u.GetDeletionTimestamp() != nil {
		return nil
	}
	svc, err := typed[corev1.Service](u)
	if err != nil {
		return err
	}
	if changed, err := c.allocateService(u, svc); err != nil || changed {
		return err // the update brings the Service back here
	}
	if err := c.exposeLoadBalancer(u, svc); err != nil {
		return err
	}
	return c.reconcileEndpoints(u, svc)
}

// exposeLoadBalancer gives a LoadBalancer Service the ingress a node-based
// load balancer (k3s's ServiceLB, kind's cloud provider) gives it: the
// InternalIPs of the Ready Nodes, which Helm's --wait and kubectl wait for.
func (c *Cluster) exposeLoadBalancer(u *unstructured.Unstructured, svc *corev1.Service) error {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) > 0 {
		return nil
	}
	nodeObjs, _, err := c.store.List(nodes, "", store.ListOptions{})
	if err != nil {
		return err
	}
	st := svc.Status.DeepCopy()
	for _, o := range nodeObjs {
		n, err := typed[corev1.Node](o)
		if err != nil {
			return err
		}
		if ip := nodeIP(n); ip != "" && nodeReady(n) {
			st.LoadBalancer.Ingress = append(st.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip, IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)})
		}
	}
	if len(st.LoadBalancer.Ingress) == 0 {
		return nil // no Ready Node yet: tried again when the Service or its Pods change
	}
	return c.setStatus(services, u, st)
}

// reconcileServicesIn brings the endpoints of every Service of a namespace
// up to date (a Pod there changed).
func (c *Cluster) reconcileServicesIn(namespace string) error {
	objs, _, err := c.store.List(services, namespace, store.ListOptions{})
	if err != nil {
		return err
	}
	for _, u := range objs {
		svc, err := typed[corev1.Service](u)
		if err != nil {
			return err
		}
		if svc.Spec.ClusterIP == "" && svc.Spec.Type != corev1.ServiceTypeExternalName {
			c.enqueue(kindService, namespace, svc.Name)
			continue
		}
		if err := c.exposeLoadBalancer(u, svc); err != nil {
			return err
		}
		if err := c.reconcileEndpoints(u, svc); err != nil {
			return err
		}
	}
	return nil
}

// allocateService defaults the Service's spec and allocates its addresses;
// changed says it was written.
func (c *Cluster) allocateService(u *unstructured.Unstructured, svc *corev1.Service) (bool, error) {
	spec := svc.Spec.DeepCopy()
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if spec.Type == corev1.ServiceTypeExternalName {
		return c.writeServiceSpec(u, svc, spec)
	}
	if spec.InternalTrafficPolicy == nil {
		spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}
	needsNodePorts := spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer
	if needsNodePorts && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	missingPort := needsNodePorts && slices.ContainsFunc(spec.Ports, func(p corev1.ServicePort) bool { return p.NodePort == 0 })
	if spec.ClusterIP != "" && !missingPort {
		if len(spec.ClusterIPs) == 0 {
			spec.ClusterIPs = []string{spec.ClusterIP}
		}
		c.defaultFamilies(spec)
		return c.writeServiceSpec(u, svc, spec)
	}
	c.allocMu.Lock()
	defer c.allocMu.Unlock()
	all, _, err := c.store.List(services, "", store.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("failed to list Services: %w", err)
	}
	usedIPs, usedPorts := map[string]bool{}, map[int32]bool{}
	for _, o := range all {
		if o.GetUID() == u.GetUID() {
			continue
		}
		other, err := typed[corev1.Service](o)
		if err != nil {
			return false, err
		}
		for _, ip := range append([]string{other.Spec.ClusterIP}, other.Spec.ClusterIPs...) {
			usedIPs[ip] = true
		}
		for _, p := range other.Spec.Ports {
			usedPorts[p.NodePort] = true
		}
	}
	if spec.ClusterIP == "" {
		ip, err := c.freeServiceIP(usedIPs)
		if err != nil {
			return false, err
		}
		spec.ClusterIP, spec.ClusterIPs = ip, []string{ip}
	}
	c.defaultFamilies(spec)
	for i := range spec.Ports {
		if !needsNodePorts || spec.Ports[i].NodePort != 0 {
			continue
		}
		port, err := freeNodePort(usedPorts)
		if err != nil {
			return false, err
		}
		usedPorts[port] = true
		spec.Ports[i].NodePort = port
	}
	return c.writeServiceSpec(u, svc, spec)
}

func (c *Cluster) defaultFamilies(spec *corev1.ServiceSpec) {
	if spec.ClusterIP == corev1.ClusterIPNone {
		if len(spec.ClusterIPs) == 0 {
			spec.ClusterIPs = []string{corev1.ClusterIPNone}
		}
	}
	if len(spec.IPFamilies) == 0 {
		family := corev1.IPv4Protocol
		if a, err := netip.ParseAddr(spec.ClusterIP); err == nil && a.Is6() {
			family = corev1.IPv6Protocol
		} else if err != nil && c.serviceCIDR().Addr().Is6() {
			family = corev1.IPv6Protocol
		}
		spec.IPFamilies = []corev1.IPFamily{family}
	}
	if spec.IPFamilyPolicy == nil {
		spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	}
}

// freeServiceIP picks a free address of the service CIDR: at random above
// the band kept for addresses people choose, as kube-apiserver does.
func (c *Cluster) freeServiceIP(used map[string]bool) (string, error) {
	cidr := c.serviceCIDR()
	n := size(cidr)
	if n <= 4 {
		return "", fmt.Errorf("the service CIDR %s is too small", cidr)
	}
	// The static band: min(max(16, n/16), 256) addresses at the bottom.
	band := min(max(16, n/16), 256)
	if band >= n-2 {
		band = 1
	}
	start := band + rand.Uint64N(n-1-band)
	for i := uint64(0); i < n; i++ {
		off := band + (start-band+i)%(n-1-band)
		a, ok := nthAddr(cidr, off)
		if ok && !used[a.String()] {
			return a.String(), nil
		}
	}
	// The band itself, but not the network address nor .1 (the kubernetes Service's).
	for off := uint64(2); off < band; off++ {
		if a, ok := nthAddr(cidr, off); ok && !used[a.String()] {
			return a.String(), nil
		}
	}
	return "", fmt.Errorf("no free cluster IP left in %s", cidr)
}

func freeNodePort(used map[int32]bool) (int32, error) {
	span := int32(nodePortLast - nodePortFirst + 1)
	start := rand.Int32N(span)
	for i := range span {
		p := nodePortFirst + (start+i)%span
		if !used[p] {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free node port left in %d-%d", nodePortFirst, nodePortLast)
}

func (c *Cluster) writeServiceSpec(u *unstructured.Unstructured, svc *corev1.Service, spec *corev1.ServiceSpec) (bool, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spec)
	if err != nil {
		return false, err
	}
	before, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&svc.Spec)
	if equalJSON(before, m) {
		return false, nil
	}
	out := u.DeepCopy()
	// Only the fields defaulted or allocated are written, over what is stored.
	stored, _, _ := unstructured.NestedMap(out.Object, "spec")
	if stored == nil {
		stored = map[string]any{}
	}
	for _, k := range []string{"type", "sessionAffinity", "ports", "clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "internalTrafficPolicy", "externalTrafficPolicy"} {
		if v, ok := m[k]; ok {
			stored[k] = v
		}
	}
	out.Object["spec"] = stored
	if _, err := c.store.Update(services, out); err != nil {
		return false, fmt.Errorf("failed to update Service %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return true, nil
}

func equalJSON(a, b map[string]any) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// reconcileEndpoints writes the Service's Endpoints and EndpointSlice: the
// addresses of the Pods it selects that have one, ready or not ready.
func (c *Cluster) reconcileEndpoints(u *unstructured.Unstructured, svc *corev1.Service) error {
	if len(svc.Spec.Selector) == 0 || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil // endpoints are the user's
	}
	objs, _, err := c.store.List(pods, svc.Namespace, store.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector)})
	if err != nil {
		return err
	}
	selected, err := typedPods(objs)
	if err != nil {
		return err
	}
	subset := corev1.EndpointSubset{}
	var sliceEndpoints []discoveryv1.Endpoint
	var ports []corev1.EndpointPort
	resolved := false
	for _, p := range selected {
		if p.Status.PodIP == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if !resolved {
			ports, resolved = endpointPorts(svc, p), true
		}
		ready, _ := podReady(p)
		terminating := p.DeletionTimestamp != nil
		serving := ready
		ready = (ready && !terminating) || svc.Spec.PublishNotReadyAddresses
		addr := corev1.EndpointAddress{IP: p.Status.PodIP, NodeName: ptr.To(p.Spec.NodeName),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
		if ready {
			subset.Addresses = append(subset.Addresses, addr)
		} else {
			subset.NotReadyAddresses = append(subset.NotReadyAddresses, addr)
		}
		sliceEndpoints = append(sliceEndpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving || svc.Spec.PublishNotReadyAddresses), Terminating: ptr.To(terminating)},
			NodeName:   ptr.To(p.Spec.NodeName),
			TargetRef:  addr.TargetRef,
		})
	}
	subset.Ports = ports
	ep := &corev1.Endpoints{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Endpoints"},
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: svc.Labels},
	}
	if len(subset.Addresses)+len(subset.NotReadyAddresses) > 0 {
		ep.Subsets = []corev1.EndpointSubset{subset}
	}
	if err := c.upsert(endpoints, ep, func(have *unstructured.Unstructured, want map[string]any) {
		delete(have.Object, "subsets")
		if s, ok := want["subsets"]; ok {
			have.Object["subsets"] = s
		}
	}); err != nil {
		return err
	}

	family := discoveryv1.AddressTypeIPv4
	if len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol {
		family = discoveryv1.AddressTypeIPv6
	}
	var slicePorts []discoveryv1.EndpointPort
	for _, p := range ports {
		slicePorts = append(slicePorts, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.Port), Protocol: ptr.To(p.Protocol), AppProtocol: p.AppProtocol})
	}
	lbls := map[string]string{}
	for k, v := range svc.Labels {
		lbls[k] = v
	}
	lbls[discoveryv1.LabelServiceName] = svc.Name
	lbls[managedByLabel] = managedByController
	slice := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: svc.Name + "-", Namespace: svc.Namespace, Labels: lbls,
			OwnerReferences: []metav1.OwnerReference{controllerRef(u)},
		},
		AddressType: family,
		Endpoints:   sliceEndpoints,
		Ports:       slicePorts,
	}
	existing, _, err := c.store.List(endpointSlices, svc.Namespace, store.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: svc.Name, managedByLabel: managedByController,
	})})
	if err != nil {
		return err
	}
	want, err := toUnstructured(slice)
	if err != nil {
		return err
	}
	if len(existing) == 0 {
		if _, err := c.store.Create(endpointSlices, want); err != nil {
			return fmt.Errorf("failed to create the EndpointSlice of Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		return nil
	}
	have := existing[0].DeepCopy()
	for _, k := range []string{"endpoints", "ports", "addressType"} {
		delete(have.Object, k)
		if v, ok := want.Object[k]; ok {
			have.Object[k] = v
		}
	}
	have.SetLabels(lbls)
	if _, err := c.store.Update(endpointSlices, have); err != nil {
		return fmt.Errorf("failed to update the EndpointSlice of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	for _, extra := range existing[1:] {
		if err := c.deleteObject(endpointSlices, extra); err != nil {
			return err
		}
	}
	return nil
}

// endpointPorts are the Service's ports as a Pod serves them: a named
// target port resolves to the Pod's container port of that name.
func endpointPorts(svc *corev1.Service, p *corev1.Pod) []corev1.EndpointPort {
	var out []corev1.EndpointPort
	for _, sp := range svc.Spec.Ports {
		port := sp.TargetPort.IntVal
		if sp.TargetPort.Type == intstr.String {
			port = 0
			for _, ctr := range p.Spec.Containers {
				for _, cp := range ctr.Ports {
					if cp.Name == sp.TargetPort.StrVal {
						port = cp.ContainerPort
					}
				}
			}
			if port == 0 {
				continue
			}
		}
		if port == 0 {
			port = sp.Port
		}
		out = append(out, corev1.EndpointPort{Name: sp.Name, Port: port, Protocol: sp.Protocol, AppProtocol: sp.AppProtocol})
	}
	return out
}

// upsert creates obj, or sets on the stored one what set copies from it.
func (c *Cluster) upsert(res store.Resource, obj metav1.Object, set func(have *unstructured.Unstructured, want map[string]any)) error {
	want, err := toUnstructured(obj)
	if err != nil {
		return err
	}
	have, err := c.store.Get(res, obj.GetNamespace(), obj.GetName())
	if isGone(err) {
		if _, err := c.store.Create(res, want); err != nil {
			return fmt.Errorf("failed to create %s %s/%s: %w", res.Resource, obj.GetNamespace(), obj.GetName(), err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	set(have, want.Object)
	if _, err := c.store.Update(res, have); err != nil {
		return fmt.Errorf("failed to update %s %s/%s: %w", res.Resource, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func (c *Cluster) serviceCIDR() netip.Prefix {
	n, _ := c.network()
	return n.services
}
