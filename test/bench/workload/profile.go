package main

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/capi-monolith/capi-monolith/dev/ports"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/report"
)

// heapProfiler takes the heap profile of dev's capi-monolith once every
// machine runs (-heap-profile), from dev's secure diagnostics endpoint (see
// devDiagnostics). It also reads the Go runtime's memory figures before the
// clusters and at the end, which tell apart what RSS holds beyond the heap
// profile (stacks, heap the collector has not returned).
type heapProfiler struct {
	path        string
	diagnostics process.Diagnostics
	before      runtimeMemory
}

// devDiagnostics picks a free loopback port for dev's secure diagnostics
// endpoint and returns dev's flags to serve it there; the token to read it
// comes once dev runs (grantDiagnostics).
func devDiagnostics() (process.Diagnostics, []string, error) {
	free, err := ports.Free(1)
	if err != nil {
		return process.Diagnostics{}, nil, err
	}
	d := process.Diagnostics{Address: fmt.Sprintf("127.0.0.1:%d", free[0])}
	return d, []string{"--diagnostics-address=" + d.Address, "--insecure-diagnostics=false"}, nil
}

// grantDiagnostics sets d's token: a ServiceAccount's, bound to pprof's and
// /metrics' URLs, as an operator reads an installed provider.
func grantDiagnostics(ctx context.Context, dev *Dev, d *process.Diagnostics) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", dev.Kubeconfig)
	if err != nil {
		return fmt.Errorf("failed to read dev's kubeconfig: %w", err)
	}
	d.Token, err = process.GrantDiagnostics(ctx, cfg)
	return err
}

// begin reads the runtime's figures before any cluster.
func (h *heapProfiler) begin(ctx context.Context) error {
	var err error
	h.before, err = readRuntimeMemory(ctx, h.diagnostics)
	return err
}

// save writes the heap profile to h.path and returns where the heap in use
// went (pprof -top, inuse_space) and the runtime's figures then.
func (h *heapProfiler) save(ctx context.Context, binary string) (string, runtimeMemory, error) {
	after, err := readRuntimeMemory(ctx, h.diagnostics)
	if err != nil {
		return "", runtimeMemory{}, err
	}
	if err := h.diagnostics.SaveProfile(ctx, "heap", h.path); err != nil {
		return "", runtimeMemory{}, err
	}
	top, err := process.Top(ctx, binary, h.path, 25, "-sample_index=inuse_space")
	return top, after, err
}

// runtimeMemory is where the Go runtime says the process's memory is, from
// the Go collector's gauges on /metrics.
type runtimeMemory struct {
	// HeapInuse is the heap in spans in use (live objects and the garbage
	// not yet collected); HeapUnreturned is free heap not yet given back
	// to the kernel (idle minus released); Stacks are goroutine stacks;
	// Sys is everything the runtime got from the kernel.
	HeapInuse, HeapUnreturned, Stacks, Sys float64
	Goroutines                             float64
}

func readRuntimeMemory(ctx context.Context, d process.Diagnostics) (runtimeMemory, error) {
	m, err := d.Metrics(ctx)
	if err != nil {
		return runtimeMemory{}, err
	}
	return runtimeMemory{
		HeapInuse:      m.Sum("go_memstats_heap_inuse_bytes"),
		HeapUnreturned: m.Sum("go_memstats_heap_idle_bytes") - m.Sum("go_memstats_heap_released_bytes"),
		Stacks:         m.Sum("go_memstats_stack_inuse_bytes"),
		Sys:            m.Sum("go_memstats_sys_bytes"),
		Goroutines:     m.Sum("go_goroutines"),
	}, nil
}

// runtimeTable is the runtime's figures before the clusters, after, and
// per cluster.
func runtimeTable(before, after runtimeMemory, clusters int) *report.Table {
	t := &report.Table{Columns: []string{"Go runtime (/metrics)", "before", "after", "per cluster"}}
	perCluster := func(b, a float64) string { return fmt.Sprintf("%.0f KiB", (a-b)/1024/float64(clusters)) }
	row := func(name string, b, a float64) {
		t.Add(name, fmt.Sprintf("%.1f MiB", b/(1<<20)), fmt.Sprintf("%.1f MiB", a/(1<<20)), perCluster(b, a))
	}
	row("heap in use", before.HeapInuse, after.HeapInuse)
	row("free heap not returned to the kernel", before.HeapUnreturned, after.HeapUnreturned)
	row("goroutine stacks", before.Stacks, after.Stacks)
	row("everything from the kernel (sys)", before.Sys, after.Sys)
	t.Add("goroutines", fmt.Sprintf("%.0f", before.Goroutines), fmt.Sprintf("%.0f", after.Goroutines),
		strings.TrimSuffix(fmt.Sprintf("%.1f", (after.Goroutines-before.Goroutines)/float64(clusters)), ".0"))
	return t
}
