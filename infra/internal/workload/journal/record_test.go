package journal_test

import (
	"encoding/json"
	"reflect"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/journal"
)

// Journals written before the store kept objects encoded must read the
// same, and so must the lines written since.
func TestAnEncodedPutIsThePutRecordsLine(t *testing.T) {
	g := NewWithT(t)
	obj := configMap("a", `<quoted "&" value>`)
	obj.SetLabels(map[string]string{"app": "x"})
	raw, err := json.Marshal(obj.Object)
	g.Expect(err).NotTo(HaveOccurred())
	want, err := json.Marshal(journal.PutRecord(configMaps, obj, 42))
	g.Expect(err).NotTo(HaveOccurred())
	got, err := journal.EncodePut(configMaps, "default", "a", raw, 42)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal(string(want)))

	rec, object, err := journal.DecodeRecordRaw(got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(object)).To(Equal(string(raw)))
	decoded, err := journal.DecodeRecord(got)
	g.Expect(err).NotTo(HaveOccurred())
	rec.Object = decoded.Object
	g.Expect(rec).To(Equal(decoded))
	fromRaw, err := journal.DecodeObject(object)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fromRaw.Object).To(Equal(decoded.Object))
}

// DecodeMeta reads what a full decode reads of apiVersion, kind and
// metadata, whatever the other members hold (strings with braces, quotes
// and escapes, nested arrays, numbers), and never panics on bad input.
func TestDecodeMetaReadsWhatAFullDecodeReads(t *testing.T) {
	g := NewWithT(t)
	for _, raw := range []string{
		`{"apiVersion":"v1","data":{"k":"}{][\"\\","n":[1,[2,{"x":"]"}]]},"kind":"ConfigMap","metadata":{"generation":3,"labels":{"a":"b"},"name":"x","namespace":"default","ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u"}],"resourceVersion":"7","uid":"u1"},"spec":{"replicas":3,"ratio":1.5,"ok":true,"none":null}}`,
		` { "kind" : "Node" , "metadata" : { "name" : "n\u00e9" } , "apiVersion" : "v1" } `,
		`{"kin\u0064":"Node","metadata":{"name":"a"},"metadata":{"name":"b"},"apiVersion":"v1","apiVersion":null}`,
		`{"apiVersion":"v1","kind":"Namespace","metadata":{}}`,
		`{"data":{},"kind":"ConfigMap"}`,
		`{}`,
	} {
		meta, err := journal.DecodeMeta([]byte(raw))
		g.Expect(err).NotTo(HaveOccurred(), raw)
		full, err := journal.DecodeObject([]byte(raw))
		g.Expect(err).NotTo(HaveOccurred(), raw)
		want := map[string]any{}
		for _, k := range []string{"apiVersion", "kind", "metadata"} {
			if v := full.Object[k]; v != nil {
				want[k] = v
			}
		}
		g.Expect(meta.Object).To(Equal(want), raw)
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"kind"`, `{"kind":`, `{"kind":"a"`, `{"kind":"a",}`, `{"metadata":{"name":"x"}`, `{"a":[1,2}`, `{"a":"\"}`, `{"a" 1}`, `{"metadata":[1]}`} {
		_, err := journal.DecodeMeta([]byte(bad))
		g.Expect(err).To(HaveOccurred(), bad)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","data":{"k":"}{"},"kind":"ConfigMap","metadata":{"name":"x"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		meta, err := journal.DecodeMeta(raw)
		if err != nil || !json.Valid(raw) {
			return
		}
		full, err := journal.DecodeObject(raw)
		if err != nil {
			return // valid JSON but not an object
		}
		for _, k := range []string{"apiVersion", "kind", "metadata"} {
			if !reflect.DeepEqual(meta.Object[k], full.Object[k]) {
				t.Fatalf("%s: DecodeMeta has %#v, a full decode %#v", k, meta.Object[k], full.Object[k])
			}
		}
	})
}
