package main

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/capi-monolith/capi-monolith/dev/ports"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// heapProfiler takes the heap profile of dev's capi-monolith once every
// machine runs (-heap-profile): dev then serves its secure diagnostics
// endpoint on a free loopback port, read with a ServiceAccount token bound
// to pprof's URLs, as an operator reads an installed provider.
type heapProfiler struct {
	path    string
	address string
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
	h := &heapProfiler{path: path, address: fmt.Sprintf("127.0.0.1:%d", free[0])}
	return h, []string{"--diagnostics-address=" + h.address, "--insecure-diagnostics=false"}, nil
}

// save writes the heap profile to h.path and returns where the heap in use
// went (pprof -top, inuse_space).
func (h *heapProfiler) save(ctx context.Context, dev *Dev, binary string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", dev.Kubeconfig)
	if err != nil {
		return "", fmt.Errorf("failed to read dev's kubeconfig: %w", err)
	}
	token, err := process.GrantDiagnostics(ctx, cfg)
	if err != nil {
		return "", err
	}
	d := process.Diagnostics{Address: h.address, Token: token}
	if err := d.SaveProfile(ctx, "heap", h.path); err != nil {
		return "", err
	}
	return process.Top(ctx, binary, h.path, 25, "-sample_index=inuse_space")
}
