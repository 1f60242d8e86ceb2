package dev

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/capi-monolith/capi-monolith/dev/capimanager"
	"github.com/capi-monolith/capi-monolith/dev/state"
	"github.com/capi-monolith/capi-monolith/dev/toolcache"
	"github.com/capi-monolith/capi-monolith/modules"
)

// newEnvironment is the environment Start fills in, step by step.
func newEnvironment(p *plan) *Environment {
	e := &Environment{
		opts: p.opts, failed: make(chan error, 1), force: make(chan struct{}),
		Managers: make([]*capimanager.Process, len(p.managers)),
	}
	// Only printed in the next steps: dev runs without it.
	e.Clusterctl, _ = toolcache.Clusterctl.Find("", p.opts.CacheDir, p.capi.Version)
	for _, m := range p.enabled {
		e.Modules = append(e.Modules, m.Name())
	}
	return e
}

// claimState makes (or takes) the state folder and its logs' folder, and
// owns it before anything runs from it.
func (e *Environment) claimState(p *plan) error {
	var err error
	if e.StateDir, e.tempState, err = stateDir(p.opts.DataDir); err != nil {
		return err
	}
	// Own the folder before anything runs from it: a live dev on the same
	// --data-dir is refused, a killed one's processes are stopped.
	if e.lock, err = state.Claim(e.StateDir); err != nil {
		// Not ours: Stop must not remove it.
		e.tempState, e.StateDir = false, ""
		return err
	}
	if e.owner, err = state.Self(); err != nil {
		return err
	}
	p.keptData = p.opts.DataDir
	if p.opts.Ephemeral {
		e.tempState, p.keptData = true, ""
	}
	// A module's own state (the inMemory clusters' workload objects) is
	// kept only where the rest is: under a kept --data-dir.
	if p.keptData != "" {
		for _, m := range p.enabled {
			if k, ok := m.(modules.StateKeeper); ok {
				k.KeepStateIn(filepath.Join(e.StateDir, "modules", m.Name()))
			}
		}
	}
	p.logDir = filepath.Join(e.StateDir, "logs")
	if err := os.MkdirAll(p.logDir, 0o700); err != nil {
		return fmt.Errorf("failed to create the log folder: %w", err)
	}
	return nil
}
