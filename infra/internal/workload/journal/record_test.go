package journal_test

import (
	"encoding/json"
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
