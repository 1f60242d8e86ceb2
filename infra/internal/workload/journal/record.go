package journal

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// Record is one change to one object, as every journal of workload
// objects keeps it (a file line here, a line of a Secret in
// secretjournal): the object as stored, or its deletion.
type Record struct {
	RV         uint64         `json:"rv"`
	Group      string         `json:"group,omitempty"`
	Resource   string         `json:"resource"`
	Namespaced bool           `json:"namespaced,omitempty"`
	Namespace  string         `json:"namespace,omitempty"`
	Name       string         `json:"name"`
	Deleted    bool           `json:"deleted,omitempty"`
	Object     map[string]any `json:"object,omitempty"`
}

// PutRecord is the record of obj stored at rv.
func PutRecord(res store.Resource, obj *unstructured.Unstructured, rv uint64) Record {
	return Record{
		RV: rv, Group: res.Group, Resource: res.Resource, Namespaced: res.Namespaced,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), Object: obj.Object,
	}
}

// DeleteRecord is the record of an object's deletion at rv.
func DeleteRecord(res store.Resource, namespace, name string, rv uint64) Record {
	return Record{
		RV: rv, Group: res.Group, Resource: res.Resource, Namespaced: res.Namespaced,
		Namespace: namespace, Name: name, Deleted: true,
	}
}

// StoreResource is the resource the record's object belongs to.
func (r Record) StoreResource() store.Resource {
	return store.Resource{Group: r.Group, Resource: r.Resource, Namespaced: r.Namespaced}
}

// DecodeRecord reads a line with Kubernetes' JSON rules for objects:
// whole numbers are int64, as unstructured objects hold them.
func DecodeRecord(line []byte) (Record, error) {
	var raw struct {
		Record
		Object json.RawMessage `json:"object,omitempty"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return Record{}, err
	}
	rec := raw.Record
	if len(raw.Object) > 0 {
		if err := utiljson.Unmarshal(raw.Object, &rec.Object); err != nil {
			return Record{}, err
		}
	}
	return rec, nil
}
