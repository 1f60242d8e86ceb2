package dev

import (
	"context"
	"errors"
)

// Start brings a dev environment up and returns once everything is ready:
// CRDs served, Cluster API's managers ready, the modules' webhook server
// serving and its cache synced. ctx bounds Start only; the environment runs
// until Stop. On failure Start stops whatever it started.
//
// Its steps, each in a file of its own: prepare (start_prepare.go) checks
// the input and finds the binaries; claimState (start_state.go) owns the
// state folder; then 1. the Kubernetes API (start_controlplane.go), 2. the
// CRDs and clusterctl's inventory (start_crds.go), 3. the certificates (start_certs.go), 4. Cluster
// API's managers, kube-controller-manager and our modules side by side
// (start_processes.go), 5. the runtime extension (start_extension.go).
func Start(ctx context.Context, opts Options) (_ *Environment, retErr error) {
	p, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	e := newEnvironment(p)
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, e.Stop())
		}
	}()
	if err := e.claimState(p); err != nil {
		return nil, err
	}
	controlPlaneLog, err := e.startControlPlane(ctx, p)
	if controlPlaneLog != nil {
		defer controlPlaneLog.Close()
	}
	if err != nil {
		return nil, err
	}
	if err := e.installCRDsAndInventory(ctx, p); err != nil {
		return nil, err
	}
	if err := e.writeCerts(p); err != nil {
		return nil, err
	}
	if err := e.startProcesses(ctx, p); err != nil {
		return nil, err
	}
	if err := e.startExtension(ctx, p); err != nil {
		return nil, err
	}
	if err := e.writeKubeconfigOut(); err != nil {
		return nil, err
	}
	return e, nil
}
