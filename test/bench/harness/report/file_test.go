package report_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

func TestWriteFileCreatesTheFolderAndKeepsOldResultsOnFailure(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "results", "x.md")
	g.Expect(report.WriteFile(path, func(w io.Writer) error { _, err := io.WriteString(w, "first"); return err })).To(Succeed())
	g.Expect(report.WriteFile(path, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half")
		return errors.New("boom")
	})).To(MatchError("boom"))
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal("first"))
}
