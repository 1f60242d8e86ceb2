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
// machine runs (-heap-profile): dev then serves its secure diagnostics
// endpoint on a free loopback port, read with a ServiceAccount token bound
// to pprof's URLs, as an operator reads an installed provider. It also reads
// the Go runtime's memory figures before the clusters and at the end, which
// tell apart what RSS holds beyond the heap profile (stacks, heap the
// collector has not returned).
type heapProfiler struct {
	path        string
	diagnostics process.Diagnostics
	before      runtimeMemory
}

// newHeapProfiler picks the endpoint's port and returns the flags dev
// needs to serve it; a nil profiler when path is empty.
func newHeapProfiler(path string) (*heapProfiler, []string, error) {
	if path == "" {
		return nil, nil, nil
	}
	free, err := ports.Free(1)
	if err != nil {
		return nil, nil, err
	}
	h := &heapProfiler{path: path, diagnostics: process.Diagnostics{Address: fmt.Sprintf("127.0.0.1:%d", free[0])}}
	return h, []string{"--diagnostics-address=" + h.diagnostics.Address, "--insecure-diagnostics=false"}, nil
}

// begin grants the token and reads the runtime's figures before any cluster.
func (h *heapProfiler) begin(ctx context.Context, dev *Dev) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", dev.Kubeconfig)
	if err != nil {
		return fmt.Errorf("failed to read dev's kubeconfig: %w", err)
	}
	if h.diagnostics.Token, err = process.GrantDiagnostics(ctx, cfg); err != nil {
		return err
	}
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
