package journal

import (
	"bytes"
	"encoding/json"
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	kjson "sigs.k8s.io/json"

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

// objectKey joins a record's other fields and its object, the last field
// json.Marshal writes. It cannot occur inside a string (a quote in a
// string is escaped), so its first occurrence in a line is the object's.
var objectKey = []byte(`,"object":`)

// EncodePut is the line (without its newline) of the record of the
// object stored at rv whose JSON is raw (store.Journal.Put's): the store's
// encoding, compact JSON as json.Marshal writes it, is spliced in as it
// is, neither decoded nor compacted again, so the line is byte for byte
// what json.Marshal makes of the PutRecord.
func EncodePut(res store.Resource, namespace, name string, raw []byte, rv uint64) ([]byte, error) {
	head, err := json.Marshal(Record{
		RV: rv, Group: res.Group, Resource: res.Resource, Namespaced: res.Namespaced,
		Namespace: namespace, Name: name,
	})
	if err != nil || len(raw) == 0 {
		return head, err
	}
	line := make([]byte, 0, len(head)+len(objectKey)+len(raw))
	line = append(line, head[:len(head)-1]...)
	line = append(line, objectKey...)
	line = append(line, raw...)
	return append(line, '}'), nil
}

// DecodeRecordRaw reads a line as DecodeRecord does, leaving the object
// as its JSON (a copy, the line's buffer may be reused), which journals
// keep rather than the decoded maps. The object is checked to be valid
// JSON but not decoded: a journal's reader decodes only what it keeps.
func DecodeRecordRaw(line []byte) (Record, json.RawMessage, error) {
	line = bytes.TrimRight(line, " \t\r\n")
	// The lines EncodePut writes: only their short head is decoded.
	if i := bytes.Index(line, objectKey); i > 0 && len(line) > i+len(objectKey) && line[len(line)-1] == '}' {
		raw := line[i+len(objectKey) : len(line)-1]
		head := make([]byte, 0, i+1)
		head = append(append(head, line[:i]...), '}')
		var rec Record
		if err := json.Unmarshal(head, &rec); err == nil && json.Valid(raw) {
			return rec, bytes.Clone(raw), nil
		}
	}
	var rec encodedRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return Record{}, nil, err
	}
	return rec.Record, rec.Object, nil
}

// DecodeObject decodes an object's JSON as DecodeRecord does.
func DecodeObject(raw []byte) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(raw, &obj.Object); err != nil {
		return nil, err
	}
	return obj, nil
}

// DecodeMeta decodes only the apiVersion, kind and metadata of an
// object's JSON: all a store restored from a journal reads of an object
// whose JSON it keeps (store.Restored.Raw). Restoring a cluster decodes
// every object it holds, and most of an object's bytes are elsewhere, so
// the other members are stepped over, not decoded. raw must be valid JSON,
// as DecodeRecordRaw returns it.
func DecodeMeta(raw []byte) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	var err error
	scanErr := members(raw, func(key, value []byte) bool {
		if string(value) == "null" {
			// As a full decode of a repeated key: the last one counts.
			delete(obj.Object, string(key))
			return true
		}
		switch string(key) {
		case "apiVersion", "kind":
			var s string
			if err = json.Unmarshal(value, &s); err == nil {
				obj.Object[string(key)] = s
			}
		case "metadata":
			var m map[string]any
			if err = kjson.UnmarshalCaseSensitivePreserveInts(value, &m); err == nil && m != nil {
				obj.Object["metadata"] = m
			}
		}
		return err == nil
	})
	if err = errors.Join(scanErr, err); err != nil {
		return nil, err
	}
	return obj, nil
}

// DecodeRecord reads a line with Kubernetes' JSON rules for objects:
// whole numbers are int64, as unstructured objects hold them.
func DecodeRecord(line []byte) (Record, error) {
	rec, raw, err := DecodeRecordRaw(line)
	if err != nil {
		return Record{}, err
	}
	if len(raw) > 0 {
		if err := utiljson.Unmarshal(raw, &rec.Object); err != nil {
			return Record{}, err
		}
	}
	return rec, nil
}
