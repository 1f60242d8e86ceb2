package main

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
)

// The process's share of what kube-apiserver served is what is left once
// the benchmark's own creates, list and watch and its /metrics reads are
// taken out; failed requests of the process stay whole.
func TestProcessRequestsLeaveOutTheBenchmarksOwn(t *testing.T) {
	g := NewWithT(t)
	const group = "infrastructure.cluster.x-k8s.io"
	served := map[harness.APIRequest]float64{
		{Verb: "POST", Resource: "monolithmachines", Group: group, Code: "201"}:         10,
		{Verb: "POST", Resource: "monolithmachines", Group: group, Code: "409"}:         1,
		{Verb: "LIST", Resource: "monolithmachines", Group: group, Code: "200"}:         1,
		{Verb: "PATCH", Resource: "monolithmachines/status", Group: group, Code: "200"}: 20,
		{Verb: "GET", Resource: "secrets", Code: "404"}:                                 3,
		{Verb: "GET", Code: "200"}: 2,
	}
	own := []harness.RequestCount{
		{RequestKind: harness.RequestKind{Verb: "POST", Resource: "monolithmachines"}, RequestStats: harness.RequestStats{Count: 10}},
		{RequestKind: harness.RequestKind{Verb: "GET", Resource: "monolithmachines"}, RequestStats: harness.RequestStats{Count: 1}},
	}
	g.Expect(processRequests(served, own)).To(Equal(map[harness.APIRequest]float64{
		{Verb: "POST", Resource: "monolithmachines", Group: group, Code: "409"}:         1,
		{Verb: "PATCH", Resource: "monolithmachines/status", Group: group, Code: "200"}: 20,
		{Verb: "GET", Resource: "secrets", Code: "404"}:                                 3,
	}))
}
