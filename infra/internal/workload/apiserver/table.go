package apiserver

import (
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// shape is the form a client asked objects in, by its Accept header.
type shape int

const (
	shapeObject   shape = iota
	shapeTable          // meta.k8s.io/v1 Table: kubectl get's server-side printing
	shapeMetadata       // meta.k8s.io/v1 PartialObjectMetadata: metadata-only clients and informers
)

// responseShape reads the first acceptable form in the Accept header;
// anything else accepted (plain JSON) is the object itself.
func responseShape(r *http.Request) shape {
	for _, accept := range strings.Split(r.Header.Get("Accept"), ",") {
		params := map[string]string{}
		for _, p := range strings.Split(accept, ";")[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			params[k] = v
		}
		if params["g"] != "meta.k8s.io" || params["v"] != "v1" {
			continue
		}
		switch params["as"] {
		case "Table":
			return shapeTable
		case "PartialObjectMetadata", "PartialObjectMetadataList":
			return shapeMetadata
		}
	}
	return shapeObject
}

func partialObjectMetadata(u *unstructured.Unstructured) map[string]any {
	return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": u.Object["metadata"]}
}

// table is the meta.k8s.io/v1 Table kubectl get prints: NAME and AGE for
// every kind, plus STATUS and VERSION for Nodes and STATUS for Pods and
// Namespaces.
func table(res *resource, items []*unstructured.Unstructured, rv string) *metav1.Table {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: rv},
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: "Name of the object"},
		},
	}
	var extra []func(*unstructured.Unstructured) any
	switch {
	case res.gv == coreV1 && res.name == "nodes":
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Status", Type: "string"})
		extra = append(extra, nodeStatus)
	case res.gv == coreV1 && (res.name == "pods" || res.name == "namespaces"):
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Status", Type: "string"})
		extra = append(extra, func(u *unstructured.Unstructured) any {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			return phase
		})
	}
	t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Age", Type: "string"})
	extra = append(extra, func(u *unstructured.Unstructured) any {
		return duration.HumanDuration(time.Since(u.GetCreationTimestamp().Time))
	})
	if res.gv == coreV1 && res.name == "nodes" {
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: "Version", Type: "string"})
		extra = append(extra, func(u *unstructured.Unstructured) any {
			v, _, _ := unstructured.NestedString(u.Object, "status", "nodeInfo", "kubeletVersion")
			return v
		})
	}
	for _, u := range items {
		cells := []any{u.GetName()}
		for _, f := range extra {
			cells = append(cells, f(u))
		}
		// The object as PartialObjectMetadata: kubectl reads names,
		// namespaces and labels from it.
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: &unstructured.Unstructured{Object: partialObjectMetadata(u)}}})
	}
	return t
}

func nodeStatus(u *unstructured.Unstructured) any {
	status := "Unknown"
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			switch m["status"] {
			case "True":
				status = "Ready"
			default:
				status = "NotReady"
			}
		}
	}
	if unschedulable, _, _ := unstructured.NestedBool(u.Object, "spec", "unschedulable"); unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}
