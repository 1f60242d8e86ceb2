package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

// processRequests is what kube-apiserver served during a run, less the
// benchmark's own requests, so the process's requests by verb, resource and
// code: envtest runs no other client. The benchmark's client only creates
// MonolithMachines, lists and watches them (its GETs are of collections, so
// LISTs to the apiserver); its reads of the apiserver's /metrics are the
// non-resource requests.
func processRequests(served map[harness.APIRequest]float64, own []harness.RequestCount) map[harness.APIRequest]float64 {
	out := maps.Clone(served)
	for k := range out {
		if k.Resource == "" {
			delete(out, k)
		}
	}
	for _, c := range own {
		verb := c.Verb
		if verb == "GET" {
			verb = "LIST"
		}
		left := float64(c.Count)
		for _, k := range sortedKeys(out) {
			if left == 0 {
				break
			}
			if k.Verb != verb || k.Resource != c.Resource || !strings.HasPrefix(k.Code, "2") {
				continue
			}
			n := min(left, out[k])
			out[k] -= n
			left -= n
		}
	}
	for k, v := range out {
		if v <= 0 {
			delete(out, k)
		}
	}
	return out
}

func sortedKeys(m map[harness.APIRequest]float64) []harness.APIRequest {
	return slices.SortedFunc(maps.Keys(m), func(a, b harness.APIRequest) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a.String(), b.String()))
	})
}

// BreakdownTable is the process's requests of each run by verb, resource
// and code as kube-apiserver counted them, per machine, with the process's
// own count (rest_client_requests_total) by method and code beside it.
func BreakdownTable(all Results) *report.Table {
	t := &report.Table{Columns: []string{"run", "N", "verb", "resource", "code", "requests", "per machine"}}
	for i, r := range all.Runs {
		var total float64
		for _, k := range sortedKeys(r.Served) {
			v := r.Served[k]
			total += v
			t.Add(fmt.Sprint(i+1), fmt.Sprint(r.N), k.Verb, k.ResourceName(), k.Code, fmt.Sprintf("%.0f", v), fmt.Sprintf("%.3f", v/float64(r.N)))
		}
		t.Add(fmt.Sprint(i+1), fmt.Sprint(r.N), "all", "kube-apiserver's count", "", fmt.Sprintf("%.0f", total), fmt.Sprintf("%.3f", total/float64(r.N)))
		var codes []string
		for _, k := range slices.Sorted(maps.Keys(r.RequestCodes)) {
			codes = append(codes, fmt.Sprintf("%s: %.0f", k, r.RequestCodes[k]))
		}
		t.Add(fmt.Sprint(i+1), fmt.Sprint(r.N), "all", "the process's count", strings.Join(codes, ", "),
			fmt.Sprintf("%.0f", r.TotalRequests()), fmt.Sprintf("%.3f", r.TotalRequests()/float64(r.N)))
	}
	return t
}
