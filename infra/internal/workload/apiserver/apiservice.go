package apiserver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// APIServices are decoded, patched and converted by client-go's scheme
// like every built-in kind, so their type is added to it: client-go does
// not carry apiregistration.k8s.io (kube-aggregator does).
func init() {
	if err := apiregistrationv1.AddToScheme(scheme.Scheme); err != nil {
		panic(fmt.Sprintf("adding apiregistration.k8s.io/v1 to client-go's scheme: %v", err))
	}
}

var apiregistrationV1 = apiregistrationv1.SchemeGroupVersion

func isAPIServiceResource(res *resource) bool {
	return res.gv == apiregistrationV1 && res.name == "apiservices"
}

// admitAPIService sets the Available condition kube-aggregator's
// availability controllers set: a local APIService (no service) is always
// available; one served by a Service is not while the Service, its port or
// a ready endpoint is missing, and with all of them is still not, since no
// server runs behind a workload cluster's Services (kube-aggregator's
// discovery check fails). The condition is computed on every write of the
// APIService, not again when its Service changes.
func admitAPIService(req *request, live, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	svc := &apiregistrationv1.APIService{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, svc); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("failed to decode the APIService: %v", err))
	}
	cond := availability(req.store, svc)
	cond.LastTransitionTime = metav1.Now()
	if live != nil {
		old := &apiregistrationv1.APIService{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, old); err == nil {
			for _, c := range old.Status.Conditions {
				if c.Type == cond.Type && c.Status == cond.Status {
					cond.LastTransitionTime = c.LastTransitionTime
				}
			}
		}
	}
	svc.Status.Conditions = []apiregistrationv1.APIServiceCondition{cond}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(svc)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to encode the APIService: %w", err))
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func availability(st *store.Store, svc *apiregistrationv1.APIService) apiregistrationv1.APIServiceCondition {
	ok := apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue}
	ref := svc.Spec.Service
	if ref == nil {
		ok.Reason, ok.Message = "Local", "Local APIServices are always available"
		return ok
	}
	not := func(reason, format string, args ...any) apiregistrationv1.APIServiceCondition {
		return apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse,
			Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	port := int32(443) // apiregistration.k8s.io/v1's default
	if ref.Port != nil {
		port = *ref.Port
	}
	u, err := st.Get(store.Resource{Resource: "services", Namespaced: true}, ref.Namespace, ref.Name)
	if err != nil {
		return not("ServiceNotFound", "service/%s in %q is not present", ref.Name, ref.Namespace)
	}
	service := &corev1.Service{}
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, service)
	if service.Spec.Type == "" || service.Spec.Type == corev1.ServiceTypeClusterIP {
		portName, found := "", false
		for _, p := range service.Spec.Ports {
			if p.Port == port {
				portName, found = p.Name, true
				break
			}
		}
		if !found {
			return not("ServicePortError", "service/%s in %q is not listening on port %d", ref.Name, ref.Namespace, port)
		}
		slices, _, _ := st.List(store.Resource{Group: "discovery.k8s.io", Resource: "endpointslices", Namespaced: true}, ref.Namespace,
			store.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: ref.Name})})
		if len(slices) == 0 {
			return not("EndpointsNotFound", "cannot find endpointslices for service/%s in %q", ref.Name, ref.Namespace)
		}
		if !hasReadyEndpoint(slices, portName) {
			return not("MissingEndpoints", "endpointslices for service/%s in %q have no addresses with port name %q", ref.Name, ref.Namespace, portName)
		}
	}
	return not("FailedDiscoveryCheck", "failing or missing response from https://%s.%s.svc:%d/apis/%s/%s: nothing serves it in this simulated cluster",
		ref.Name, ref.Namespace, port, svc.Spec.Group, svc.Spec.Version)
}

func hasReadyEndpoint(slices []*unstructured.Unstructured, portName string) bool {
	for _, u := range slices {
		s := &discoveryv1.EndpointSlice{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s) != nil {
			continue
		}
		named := false
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == portName {
				named = true
			}
		}
		if !named {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				return true
			}
		}
	}
	return false
}
