package process

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const scrape = `# TYPE capi_monolith_api_watches_open gauge
capi_monolith_api_watches_open{resource="clusters.cluster.x-k8s.io"} 1
capi_monolith_api_watches_open{resource="secrets"} 0
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="h",method="PATCH"} 7
rest_client_requests_total{code="409",host="h",method="PATCH"} 1
rest_client_requests_total{code="200",host="h",method="GET"} 3
`

func TestMetricsSumAndGroupByLabel(t *testing.T) {
	g := NewWithT(t)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(scrape))
	g.Expect(err).NotTo(HaveOccurred())
	m := Metrics(families)

	g.Expect(m.Sum("rest_client_requests_total")).To(Equal(11.0))
	g.Expect(m.Sum("rest_client_requests_total", "method", "PATCH")).To(Equal(8.0))
	g.Expect(m.Sum("rest_client_requests_total", "method", "PATCH", "code", "409")).To(Equal(1.0))
	g.Expect(m.Sum("no_such_metric")).To(BeZero())
	g.Expect(m.ByLabel("rest_client_requests_total", "method")).To(Equal(map[string]float64{"PATCH": 8, "GET": 3}))
	g.Expect(m.ByLabels("rest_client_requests_total", "method", "code")).To(Equal(map[string]float64{"PATCH 200": 7, "PATCH 409": 1, "GET 200": 3}))
	g.Expect(m.ByLabel("capi_monolith_api_watches_open", "resource")).To(Equal(map[string]float64{"clusters.cluster.x-k8s.io": 1, "secrets": 0}))
}
