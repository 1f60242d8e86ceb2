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

// encodedRecord is a Record whose object is already JSON: the object's
// field hides the embedded one, so the line is what Record makes.
type encodedRecord struct {
	Record
	Object json.RawMessage `json:"object,omitempty"`
}

// EncodePut is the line (without its newline) of the record of the
// object stored at rv whose JSON is raw (store.Journal.Put's): the store's
// encoding is written as it is, not decoded and encoded again.
func EncodePut(res store.Resource, namespace, name string, raw []byte, rv uint64) ([]byte, error) {
	return json.Marshal(encodedRecord{Record: Record{
		RV: rv, Group: res.Group, Resource: res.Resource, Namespaced: res.Namespaced,
		Namespace: namespace, Name: name,
	}, Object: raw})
}

// DecodeRecordRaw reads a line as DecodeRecord does, leaving the object
// as its JSON, which journals keep rather than the decoded maps.
func DecodeRecordRaw(line []byte) (Record, json.RawMessage, error) {
	var raw encodedRecord
	if err := json.Unmarshal(line, &raw); err != nil {
		return Record{}, nil, err
	}
	return raw.Record, raw.Object, nil
}

// DecodeObject decodes an object's JSON as DecodeRecord does.
func DecodeObject(raw []byte) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(raw, &obj.Object); err != nil {
		return nil, err
	}
	return obj, nil
}

// DecodeRecord reads a line with Kubernetes' JSON rules for objects:
// whole numbers are int64, as unstructured objects hold them.
func DecodeRecord(line []byte) (Record, error) {
	var raw encodedRecord
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
