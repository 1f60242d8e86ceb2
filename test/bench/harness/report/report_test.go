package report

import (
	"math"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
		want   string
	}{
		{"an odd count has the middle value as median", []float64{3, 1, 2}, "2.0 (1.0–3.0)"},
		{"an even count has the mean of the middle values as median", []float64{4, 1, 2, 3}, "2.5 (1.0–4.0)"},
		{"one run prints no spread", []float64{7}, "7.0"},
		{"NaNs are ignored", []float64{math.NaN(), 5, 1}, "3.0 (1.0–5.0)"},
		{"no value prints a dash", nil, "–"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(Summarize(tc.values).Format(1)).To(Equal(tc.want))
		})
	}
}

func TestTablePrintsTextAndMarkdown(t *testing.T) {
	g := NewWithT(t)
	tab := &Table{Columns: []string{"N", "rate"}}
	tab.Add("1000", "48.2")
	tab.Add("10000")

	var text strings.Builder
	g.Expect(tab.WriteText(&text)).To(Succeed())
	g.Expect(text.String()).To(Equal("N      rate\n1000   48.2\n10000  \n"))

	var md strings.Builder
	g.Expect(tab.WriteMarkdown(&md)).To(Succeed())
	g.Expect(md.String()).To(Equal("| N | rate |\n| --- | --- |\n| 1000 | 48.2 |\n| 10000 |  |\n"))
}

func TestTableRejectsRowsWiderThanItsColumns(t *testing.T) {
	g := NewWithT(t)
	tab := &Table{Columns: []string{"N"}}
	tab.Add("1", "2")
	g.Expect(tab.WriteText(&strings.Builder{})).To(HaveOccurred())
	g.Expect(tab.WriteMarkdown(&strings.Builder{})).To(HaveOccurred())
}
