package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// Side is one provider of the side-by-side run.
type Side string

// The two sides: our infra module's inMemory backend, and Cluster API's
// in-memory provider as a process beside dev.
const (
	SideOurs Side = "ours (infra, inMemory)"
	SidePeer Side = "Cluster API in-memory"
)

// sideDevArgs are dev's module flags for a side: ours runs the infra module
// alone; the peer's run turns it off (dev needs one module: ipam, idle
// here), so that the peer is the only infrastructure provider.
func sideDevArgs(side Side) []string {
	if side == SidePeer {
		return []string{"--enable-modules=ipam"}
	}
	return []string{"--enable-modules=infra"}
}

// SideRun is one side's measured run.
type SideRun struct {
	Side Side
	Run
	// Provider is the part whose process is the infrastructure provider.
	Provider Part
}

// SBS is the side-by-side result.
type SBS struct {
	Runs []SideRun
	// PeerCommit says which build of the peer ran.
	PeerCommit string
}

// sideOrder alternates the sides over rounds, ours first.
func sideOrder(rounds int) []Side {
	var out []Side
	for range rounds {
		out = append(out, SideOurs, SidePeer)
	}
	return out
}

// runSideBySide builds both binaries unless given and runs each side
// rounds times, alternating: a fresh dev each time, with the same flags but
// for the modules, the same clusters but for their infrastructure kinds.
func runSideBySide(ctx context.Context, cfg Config, binary, peerBinary string, rounds int, log io.Writer) (_ *SBS, retErr error) {
	scratch, err := os.MkdirTemp("", "capi-monolith-bench-workload-sbs-")
	if err != nil {
		return nil, fmt.Errorf("failed to create a scratch folder: %w", err)
	}
	defer func() {
		if retErr != nil {
			// The peer's log is there.
			fmt.Fprintf(log, "kept %s\n", scratch)
			return
		}
		os.RemoveAll(scratch)
	}()
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	if binary == "" {
		fmt.Fprintln(log, "building capi-monolith")
		if binary, err = process.Build(ctx, scratch); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(log, "building %s@%s in %s\n", peerPackage, peerVersion, scratch)
	built, moduleDir, err := buildPeer(ctx, root, scratch)
	if err != nil {
		return nil, err
	}
	if peerBinary == "" {
		peerBinary = built
	}
	out := &SBS{PeerCommit: peerModule + "@" + peerVersion}
	for i, side := range sideOrder(rounds) {
		sideCfg := cfg
		sideCfg.Peer = side == SidePeer
		sideCfg.AddonObjects = 0
		sideCfg.DevArgs = append(slices.Clone(cfg.DevArgs), sideDevArgs(side)...)
		if cfg.CPUProfiling.Dir != "" {
			sideCfg.CPUProfiling.Dir = filepath.Join(cfg.CPUProfiling.Dir, fmt.Sprintf("run-%d", i+1))
		}
		fmt.Fprintf(log, "run %d: %s\n", i+1, side)
		r, err := runSide(ctx, sideCfg, binary, peerBinary, moduleDir, filepath.Join(scratch, fmt.Sprintf("run-%d", i+1)), log)
		if err != nil {
			return out, fmt.Errorf("run %d (%s): %w", i+1, side, err)
		}
		out.Runs = append(out.Runs, r)
	}
	return out, nil
}

// runSide starts dev (and the peer beside it), measures and stops both.
func runSide(ctx context.Context, cfg Config, binary, peerBinary, moduleDir, dir string, log io.Writer) (SideRun, error) {
	sr := SideRun{Provider: PartMonolith}
	if cfg.Peer {
		sr.Side, sr.Provider = SidePeer, PartPeer
	} else {
		sr.Side = SideOurs
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return sr, fmt.Errorf("failed to create %s: %w", dir, err)
	}
	// With CPU profiles, the provider serves its secure diagnostics
	// endpoint: dev's capi-monolith on ours, the peer's manager on its.
	profiling := cfg.CPUProfiling.Dir != ""
	devArgs := cfg.DevArgs
	var diagnostics process.Diagnostics
	if profiling && !cfg.Peer {
		d, args, err := devDiagnostics()
		if err != nil {
			return sr, err
		}
		diagnostics, devArgs = d, append(slices.Clone(devArgs), args...)
	}
	dev, err := StartDev(ctx, binary, dir, devArgs)
	if err != nil {
		return sr, err
	}
	var peer *process.Process
	stop := func() error {
		var errs []error
		if peer != nil {
			errs = append(errs, peer.Stop())
		}
		return errors.Join(append(errs, dev.Stop())...)
	}
	if profiling {
		if err := grantDiagnostics(ctx, dev, &diagnostics); err != nil {
			return sr, errors.Join(err, stop())
		}
	}
	if cfg.Peer {
		restCfg, err := clientcmd.BuildConfigFromFlags("", dev.Kubeconfig)
		if err == nil {
			err = installPeerCRDs(restCfg, moduleDir)
		}
		if err == nil {
			peer, err = startPeer(ctx, peerBinary, dev.Kubeconfig, filepath.Join(dir, "peer"), diagnostics.Token)
		}
		if err != nil {
			return sr, errors.Join(err, stop())
		}
		dev.PIDs[PartPeer] = peer.PID()
		diagnostics = peer.Diagnostics
	}
	if profiling {
		cfg.CPUProfiling.Provider = diagnostics
	}
	sr.LoadBefore = harness.LoadAverage()
	fmt.Fprintf(log, "dev ready (load %s); %d clusters x (1 control plane + %d workers)\n", sr.LoadBefore, cfg.Clusters, cfg.Workers)
	sr.Result, err = Measure(ctx, dev, cfg, log)
	sr.LoadAfter = harness.LoadAverage()
	if stopErr := stop(); stopErr != nil {
		fmt.Fprintf(log, "stopping: %v\n", stopErr)
	}
	if err != nil && peer != nil {
		err = fmt.Errorf("%w (the peer's log is %s)", err, peer.LogFile())
	}
	return sr, err
}
