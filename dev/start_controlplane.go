package dev

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/dev/controlplane"
)

// startControlPlane is step 1, the Kubernetes API: etcd and kube-apiserver,
// or the cluster of --kubeconfig (repaired of what a killed dev left in
// it). It returns the control plane's log, for Start to close when it
// returns.
func (e *Environment) startControlPlane(ctx context.Context, p *plan) (io.Closer, error) {
	done := p.display.Step(controlPlaneStepName(p.opts.Kubeconfig))
	cpLog, err := os.OpenFile(filepath.Join(p.logDir, "control-plane.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		done(err)
		return nil, fmt.Errorf("failed to open the control plane log: %w", err)
	}
	e.controlPlane, err = controlplane.Start(ctx, controlplane.Options{
		Kubeconfig: p.opts.Kubeconfig,
		CacheDir:   p.opts.CacheDir,
		WorkDir:    e.StateDir,
		DataDir:    dataDirOrEmpty(p.keptData, e.StateDir),
		Output:     cpLog,
		OnProcess:  e.record,
	})
	done(err)
	if err != nil {
		return cpLog, err
	}
	e.Config = e.controlPlane.Config
	if e.Scheme, err = newScheme(p.enabled); err != nil {
		return cpLog, err
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return cpLog, fmt.Errorf("failed to create a client: %w", err)
	}
	if e.controlPlane.External {
		// A dev killed earlier left webhooks pointing at nothing (with
		// failurePolicy Fail) and CRD conversions at a dead port: the
		// cluster cannot read or write Cluster API objects until undone.
		left, err := repair(ctx, e.Client)
		if !left.Empty() {
			p.display.Printf("  repaired what a killed capi-monolith dev left in the cluster: %s\n", left)
		}
		if err != nil {
			return cpLog, err
		}
	}
	return cpLog, nil
}
