package apiserver

import (
	"encoding/json"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// One storage, two shapes: kube-apiserver keeps core/v1 and
// events.k8s.io/v1 Events in one resource (stored as core/v1), and
// autoscaling/v1 and autoscaling/v2 HorizontalPodAutoscalers in one
// (stored as v2). The Handler does the same: such a resource's objects are
// stored under the storage resource in the storage shape, converted on
// every write (toStorage) and on every read, list and watch event
// (inVersion), so an object written in one version is read, listed and
// watched in the other.

type resourceQuantity = apiresource.Quantity

// conversion is how a resource's objects map to the storage resource.
type conversion struct {
	// storage is where the objects are kept.
	storage schema.GroupResource
	// storageVersion is the group version objects are stored in, kind
	// their kind.
	storageVersion schema.GroupVersion
	kind           string
	// toStorage and fromStorage convert typed objects between the
	// resource's version and the storage version.
	toStorage, fromStorage func(in map[string]any) (map[string]any, error)
}

var (
	eventsStorage = &conversion{
		storage: schema.GroupResource{Resource: "events"}, storageVersion: coreV1, kind: "Event",
		toStorage: convertTyped(&eventsv1.Event{}, func(o runtime.Object) runtime.Object { return eventToCore(o.(*eventsv1.Event)) }),
		fromStorage: convertTyped(&corev1.Event{}, func(o runtime.Object) runtime.Object {
			return eventFromCore(o.(*corev1.Event))
		}),
	}
	autoscalingV2 = schema.GroupVersion{Group: "autoscaling", Version: "v2"}
	hpaV1Storage  = &conversion{
		storage: schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}, storageVersion: autoscalingV2,
		kind: "HorizontalPodAutoscaler",
		toStorage: convertTyped(&autoscalingv1.HorizontalPodAutoscaler{}, func(o runtime.Object) runtime.Object {
			return hpaToV2(o.(*autoscalingv1.HorizontalPodAutoscaler))
		}),
		fromStorage: convertTyped(&autoscalingv2.HorizontalPodAutoscaler{}, func(o runtime.Object) runtime.Object {
			return hpaToV1(o.(*autoscalingv2.HorizontalPodAutoscaler))
		}),
	}
)

// conversionOf is the conversion of a resource served from another's
// storage, or nil.
func conversionOf(gv schema.GroupVersion, name string) *conversion {
	switch {
	case gv == eventsV1 && name == "events":
		return eventsStorage
	case gv == autoscalingV1 && name == "horizontalpodautoscalers":
		return hpaV1Storage
	}
	return nil
}

// convertTyped makes a conversion of unstructured objects through typed
// ones: in is decoded into a copy of from, converted by fn, and encoded.
func convertTyped(from runtime.Object, fn func(runtime.Object) runtime.Object) func(map[string]any) (map[string]any, error) {
	return func(in map[string]any) (map[string]any, error) {
		obj := from.DeepCopyObject()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(in, obj); err != nil {
			return nil, err
		}
		out := fn(obj)
		gvks, _, err := scheme.Scheme.ObjectKinds(out)
		if err != nil {
			return nil, err
		}
		out.GetObjectKind().SetGroupVersionKind(gvks[0])
		return runtime.DefaultUnstructuredConverter.ToUnstructured(out)
	}
}

// toStorage is obj (in res's version) as the store keeps it.
func toStorage(res *resource, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if res == nil || res.conversion == nil || obj == nil {
		return obj, nil
	}
	out, err := res.conversion.toStorage(obj.Object)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to convert %s to %s: %w", res.gvk(), res.conversion.storageVersion, err))
	}
	return &unstructured.Unstructured{Object: out}, nil
}

func eventToCore(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Related:             in.Related,
		Message:             in.Note,
		Reason:              in.Reason,
		Type:                in.Type,
		Action:              in.Action,
		EventTime:           in.EventTime,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Source:              in.DeprecatedSource,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

func eventFromCore(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:               in.ObjectMeta,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Reason:                   in.Reason,
		Type:                     in.Type,
		Action:                   in.Action,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
		DeprecatedSource:         in.Source,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

// The annotations an autoscaling/v1 HorizontalPodAutoscaler carries what
// its version has no field for, as kube-apiserver's conversion names them;
// metrics and current metrics in autoscaling/v1's MetricSpec and
// MetricStatus shapes, behavior and conditions in v2's.
const (
	hpaMetricsAnnotation        = "autoscaling.alpha.kubernetes.io/metrics"
	hpaCurrentMetricsAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	hpaConditionsAnnotation     = "autoscaling.alpha.kubernetes.io/conditions"
	hpaBehaviorAnnotation       = "autoscaling.alpha.kubernetes.io/behavior"
)

func hpaToV1(in *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv1.HorizontalPodAutoscaler {
	out := &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    in.Spec.MinReplicas,
			MaxReplicas:    in.Spec.MaxReplicas,
		},
		Status: autoscalingv1.HorizontalPodAutoscalerStatus{
			ObservedGeneration: in.Status.ObservedGeneration,
			LastScaleTime:      in.Status.LastScaleTime,
			CurrentReplicas:    in.Status.CurrentReplicas,
			DesiredReplicas:    in.Status.DesiredReplicas,
		},
	}
	annotations := map[string]string{}
	var others []autoscalingv1.MetricSpec
	for _, m := range in.Spec.Metrics {
		if out.Spec.TargetCPUUtilizationPercentage == nil && m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil &&
			m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.Type == autoscalingv2.UtilizationMetricType && m.Resource.Target.AverageUtilization != nil {
			cpu := *m.Resource.Target.AverageUtilization
			out.Spec.TargetCPUUtilizationPercentage = &cpu
			continue
		}
		others = append(others, metricSpecToV1(m))
	}
	setJSONAnnotation(annotations, hpaMetricsAnnotation, others)
	var current []autoscalingv1.MetricStatus
	for _, m := range in.Status.CurrentMetrics {
		if out.Status.CurrentCPUUtilizationPercentage == nil && m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil &&
			m.Resource.Name == corev1.ResourceCPU && m.Resource.Current.AverageUtilization != nil {
			cpu := *m.Resource.Current.AverageUtilization
			out.Status.CurrentCPUUtilizationPercentage = &cpu
			continue
		}
		current = append(current, metricStatusToV1(m))
	}
	setJSONAnnotation(annotations, hpaCurrentMetricsAnnotation, current)
	setJSONAnnotation(annotations, hpaConditionsAnnotation, in.Status.Conditions)
	if in.Spec.Behavior != nil {
		if b, err := json.Marshal(in.Spec.Behavior); err == nil {
			annotations[hpaBehaviorAnnotation] = string(b)
		}
	}
	if len(annotations) > 0 {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		for k, v := range annotations {
			out.Annotations[k] = v
		}
	}
	return out
}

func setJSONAnnotation[T any](annotations map[string]string, key string, v []T) {
	if len(v) == 0 {
		return
	}
	b, err := json.Marshal(v)
	if err == nil {
		annotations[key] = string(b)
	}
}

func hpaToV2(in *autoscalingv1.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	out := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    in.Spec.MinReplicas,
			MaxReplicas:    in.Spec.MaxReplicas,
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: in.Status.ObservedGeneration,
			LastScaleTime:      in.Status.LastScaleTime,
			CurrentReplicas:    in.Status.CurrentReplicas,
			DesiredReplicas:    in.Status.DesiredReplicas,
		},
	}
	a := out.Annotations
	if cpu := in.Spec.TargetCPUUtilizationPercentage; cpu != nil {
		v := *cpu
		out.Spec.Metrics = append(out.Spec.Metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &v}}})
	}
	var others []autoscalingv1.MetricSpec
	if json.Unmarshal([]byte(a[hpaMetricsAnnotation]), &others) == nil {
		for _, m := range others {
			out.Spec.Metrics = append(out.Spec.Metrics, metricSpecToV2(m))
		}
	}
	if cpu := in.Status.CurrentCPUUtilizationPercentage; cpu != nil {
		v := *cpu
		out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: &v}}})
	}
	var current []autoscalingv1.MetricStatus
	if json.Unmarshal([]byte(a[hpaCurrentMetricsAnnotation]), &current) == nil {
		for _, m := range current {
			out.Status.CurrentMetrics = append(out.Status.CurrentMetrics, metricStatusToV2(m))
		}
	}
	_ = json.Unmarshal([]byte(a[hpaConditionsAnnotation]), &out.Status.Conditions)
	var behavior autoscalingv2.HorizontalPodAutoscalerBehavior
	if json.Unmarshal([]byte(a[hpaBehaviorAnnotation]), &behavior) == nil {
		out.Spec.Behavior = &behavior
	}
	for _, k := range []string{hpaMetricsAnnotation, hpaCurrentMetricsAnnotation, hpaConditionsAnnotation, hpaBehaviorAnnotation} {
		delete(out.Annotations, k)
	}
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return out
}

// target is a v2 MetricTarget from v1's utilization, average value and
// value, the first set deciding its type.
func target(utilization *int32, average, value *resourceQuantity) autoscalingv2.MetricTarget {
	switch {
	case utilization != nil:
		return autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: utilization}
	case average != nil:
		return autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: average}
	default:
		return autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: value}
	}
}

func metricSpecToV2(in autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(in.Type)}
	switch {
	case in.Object != nil:
		value := in.Object.TargetValue
		t := target(nil, in.Object.AverageValue, &value)
		if in.Object.AverageValue != nil {
			t.Value = nil
		}
		out.Object = &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference(in.Object.Target),
			Metric:          autoscalingv2.MetricIdentifier{Name: in.Object.MetricName, Selector: in.Object.Selector},
			Target:          t,
		}
	case in.Pods != nil:
		average := in.Pods.TargetAverageValue
		out.Pods = &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: in.Pods.MetricName, Selector: in.Pods.Selector},
			Target: target(nil, &average, nil),
		}
	case in.Resource != nil:
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: in.Resource.Name,
			Target: target(in.Resource.TargetAverageUtilization, in.Resource.TargetAverageValue, nil)}
	case in.ContainerResource != nil:
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: in.ContainerResource.Name, Container: in.ContainerResource.Container,
			Target: target(in.ContainerResource.TargetAverageUtilization, in.ContainerResource.TargetAverageValue, nil)}
	case in.External != nil:
		out.External = &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: in.External.MetricName, Selector: in.External.MetricSelector},
			Target: target(nil, in.External.TargetAverageValue, in.External.TargetValue),
		}
	}
	return out
}

func metricSpecToV1(in autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(in.Type)}
	switch {
	case in.Object != nil:
		out.Object = &autoscalingv1.ObjectMetricSource{
			Target:     autoscalingv1.CrossVersionObjectReference(in.Object.DescribedObject),
			MetricName: in.Object.Metric.Name, Selector: in.Object.Metric.Selector,
			AverageValue: in.Object.Target.AverageValue,
		}
		if in.Object.Target.Value != nil {
			out.Object.TargetValue = *in.Object.Target.Value
		}
	case in.Pods != nil:
		out.Pods = &autoscalingv1.PodsMetricSource{MetricName: in.Pods.Metric.Name, Selector: in.Pods.Metric.Selector}
		if in.Pods.Target.AverageValue != nil {
			out.Pods.TargetAverageValue = *in.Pods.Target.AverageValue
		}
	case in.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: in.Resource.Name,
			TargetAverageUtilization: in.Resource.Target.AverageUtilization, TargetAverageValue: in.Resource.Target.AverageValue}
	case in.ContainerResource != nil:
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: in.ContainerResource.Name, Container: in.ContainerResource.Container,
			TargetAverageUtilization: in.ContainerResource.Target.AverageUtilization, TargetAverageValue: in.ContainerResource.Target.AverageValue}
	case in.External != nil:
		out.External = &autoscalingv1.ExternalMetricSource{MetricName: in.External.Metric.Name, MetricSelector: in.External.Metric.Selector,
			TargetValue: in.External.Target.Value, TargetAverageValue: in.External.Target.AverageValue}
	}
	return out
}

func metricStatusToV1(in autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(in.Type)}
	orZero := func(q *resourceQuantity) resourceQuantity {
		if q == nil {
			return resourceQuantity{}
		}
		return *q
	}
	switch {
	case in.Object != nil:
		out.Object = &autoscalingv1.ObjectMetricStatus{Target: autoscalingv1.CrossVersionObjectReference(in.Object.DescribedObject),
			MetricName: in.Object.Metric.Name, Selector: in.Object.Metric.Selector,
			CurrentValue: orZero(in.Object.Current.Value), AverageValue: in.Object.Current.AverageValue}
	case in.Pods != nil:
		out.Pods = &autoscalingv1.PodsMetricStatus{MetricName: in.Pods.Metric.Name, Selector: in.Pods.Metric.Selector,
			CurrentAverageValue: orZero(in.Pods.Current.AverageValue)}
	case in.Resource != nil:
		out.Resource = &autoscalingv1.ResourceMetricStatus{Name: in.Resource.Name,
			CurrentAverageUtilization: in.Resource.Current.AverageUtilization, CurrentAverageValue: orZero(in.Resource.Current.AverageValue)}
	case in.ContainerResource != nil:
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricStatus{Name: in.ContainerResource.Name, Container: in.ContainerResource.Container,
			CurrentAverageUtilization: in.ContainerResource.Current.AverageUtilization, CurrentAverageValue: orZero(in.ContainerResource.Current.AverageValue)}
	case in.External != nil:
		out.External = &autoscalingv1.ExternalMetricStatus{MetricName: in.External.Metric.Name, MetricSelector: in.External.Metric.Selector,
			CurrentValue: orZero(in.External.Current.Value), CurrentAverageValue: in.External.Current.AverageValue}
	}
	return out
}

func metricStatusToV2(in autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(in.Type)}
	switch {
	case in.Object != nil:
		value := in.Object.CurrentValue
		out.Object = &autoscalingv2.ObjectMetricStatus{DescribedObject: autoscalingv2.CrossVersionObjectReference(in.Object.Target),
			Metric:  autoscalingv2.MetricIdentifier{Name: in.Object.MetricName, Selector: in.Object.Selector},
			Current: autoscalingv2.MetricValueStatus{Value: &value, AverageValue: in.Object.AverageValue}}
	case in.Pods != nil:
		average := in.Pods.CurrentAverageValue
		out.Pods = &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: in.Pods.MetricName, Selector: in.Pods.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: &average}}
	case in.Resource != nil:
		average := in.Resource.CurrentAverageValue
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: in.Resource.Name,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: in.Resource.CurrentAverageUtilization, AverageValue: &average}}
	case in.ContainerResource != nil:
		average := in.ContainerResource.CurrentAverageValue
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: in.ContainerResource.Name, Container: in.ContainerResource.Container,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: in.ContainerResource.CurrentAverageUtilization, AverageValue: &average}}
	case in.External != nil:
		value := in.External.CurrentValue
		out.External = &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: in.External.MetricName, Selector: in.External.MetricSelector},
			Current: autoscalingv2.MetricValueStatus{Value: &value, AverageValue: in.External.CurrentAverageValue}}
	}
	return out
}

// objectConvertor is client-go's scheme (which has no internal versions,
// so converts nothing between versions) with the conversions above: the
// field manager converts the managedFields of one version's writers to
// the other's, as kube-apiserver's does.
type objectConvertor struct{ runtime.ObjectConvertor }

func (c objectConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	target, isGV := gv.(schema.GroupVersion)
	if !ok || !isGV {
		return c.ObjectConvertor.ConvertToVersion(in, gv)
	}
	from := u.GroupVersionKind()
	if from.GroupVersion() == target {
		return u, nil
	}
	for served, conv := range map[schema.GroupVersion]*conversion{eventsV1: eventsStorage, autoscalingV1: hpaV1Storage} {
		var out map[string]any
		var err error
		switch {
		case from.GroupVersion() == served && target == conv.storageVersion:
			out, err = conv.toStorage(u.Object)
		case from.GroupVersion() == conv.storageVersion && target == served && conv.kind == from.Kind:
			out, err = conv.fromStorage(u.Object)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		return &unstructured.Unstructured{Object: out}, nil
	}
	return c.ObjectConvertor.ConvertToVersion(in, gv)
}

// eventsFieldLabels are the field labels of events.k8s.io Events, each
// with the core Event's label the store selects by.
var eventsFieldLabels = map[string]string{
	"metadata.name":             "metadata.name",
	"metadata.namespace":        "metadata.namespace",
	"regarding.kind":            "involvedObject.kind",
	"regarding.namespace":       "involvedObject.namespace",
	"regarding.name":            "involvedObject.name",
	"regarding.uid":             "involvedObject.uid",
	"regarding.apiVersion":      "involvedObject.apiVersion",
	"regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath":       "involvedObject.fieldPath",
	"reason":                    "reason",
	"reportingController":       "reportingComponent",
	"type":                      "type",
}

// storageFieldSelector is fs in the storage resource's field labels: an
// events.k8s.io Event's regarding.name is the stored core Event's
// involvedObject.name. A label the resource does not have is 400, as
// kube-apiserver answers.
func storageFieldSelector(res *resource, fs fields.Selector) (fields.Selector, error) {
	if fs == nil || res.conversion != eventsStorage {
		return fs, nil
	}
	return fs.Transform(func(label, value string) (string, string, error) {
		to, ok := eventsFieldLabels[label]
		if !ok {
			return "", "", apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", label))
		}
		return to, value, nil
	})
}
