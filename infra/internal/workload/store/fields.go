package store

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fieldPath is one selectable field: where it sits in the object, and what it
// reads as when absent (kube-apiserver renders an unset bool as "false").
type fieldPath struct {
	path       []string
	whenAbsent string
}

func sel(whenAbsent string, path ...string) fieldPath {
	return fieldPath{path: path, whenAbsent: whenAbsent}
}

// selectableFields are the field labels kube-apiserver accepts beyond
// metadata.name and metadata.namespace, for the resources kubectl and Cluster
// API's controllers select on (drain lists Pods by spec.nodeName; kubectl
// describe lists Events by involvedObject).
var selectableFields = map[schema.GroupResource]map[string]fieldPath{
	{Resource: "pods"}: {
		"spec.nodeName":            sel("", "spec", "nodeName"),
		"spec.restartPolicy":       sel("", "spec", "restartPolicy"),
		"spec.schedulerName":       sel("", "spec", "schedulerName"),
		"spec.serviceAccountName":  sel("", "spec", "serviceAccountName"),
		"spec.hostNetwork":         sel("false", "spec", "hostNetwork"),
		"status.phase":             sel("", "status", "phase"),
		"status.podIP":             sel("", "status", "podIP"),
		"status.nominatedNodeName": sel("", "status", "nominatedNodeName"),
	},
	{Resource: "nodes"}: {
		"spec.unschedulable": sel("false", "spec", "unschedulable"),
	},
	{Resource: "namespaces"}: {
		"status.phase": sel("", "status", "phase"),
	},
	{Resource: "secrets"}: {
		"type": sel("", "type"),
	},
	{Resource: "events"}: {
		"involvedObject.kind":            sel("", "involvedObject", "kind"),
		"involvedObject.namespace":       sel("", "involvedObject", "namespace"),
		"involvedObject.name":            sel("", "involvedObject", "name"),
		"involvedObject.uid":             sel("", "involvedObject", "uid"),
		"involvedObject.apiVersion":      sel("", "involvedObject", "apiVersion"),
		"involvedObject.resourceVersion": sel("", "involvedObject", "resourceVersion"),
		"involvedObject.fieldPath":       sel("", "involvedObject", "fieldPath"),
		"reason":                         sel("", "reason"),
		"reportingComponent":             sel("", "reportingComponent"),
		"source":                         sel("", "source", "component"),
		"type":                           sel("", "type"),
	},
	{Group: "events.k8s.io", Resource: "events"}: {
		"regarding.kind":      sel("", "regarding", "kind"),
		"regarding.namespace": sel("", "regarding", "namespace"),
		"regarding.name":      sel("", "regarding", "name"),
		"regarding.uid":       sel("", "regarding", "uid"),
		"reason":              sel("", "reason"),
		"reportingController": sel("", "reportingController"),
		"type":                sel("", "type"),
	},
}

// validateFieldSelector refuses field labels the resource cannot be selected
// by, with the 400 kube-apiserver answers.
func validateFieldSelector(res Resource, sel fields.Selector) error {
	if sel == nil {
		return nil
	}
	extra := selectableFields[res.GroupResource()]
	for _, req := range sel.Requirements() {
		if req.Field == "metadata.name" || req.Field == "metadata.namespace" {
			continue
		}
		if _, ok := extra[req.Field]; !ok {
			return apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	return nil
}

// fieldSet is the object's selectable fields.
func fieldSet(res Resource, obj *unstructured.Unstructured) fields.Set {
	extra := selectableFields[res.GroupResource()]
	set := make(fields.Set, 2+len(extra))
	set["metadata.name"] = obj.GetName()
	set["metadata.namespace"] = obj.GetNamespace()
	for label, fp := range extra {
		v, found, err := unstructured.NestedFieldNoCopy(obj.Object, fp.path...)
		if !found || err != nil || v == nil {
			set[label] = fp.whenAbsent
			continue
		}
		set[label] = fmt.Sprint(v)
	}
	return set
}
