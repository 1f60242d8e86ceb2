package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/capi-monolith/capi-monolith/dev/capimanager"
	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/controllermanager"
	"github.com/capi-monolith/capi-monolith/dev/controlplane"
	"github.com/capi-monolith/capi-monolith/dev/ports"
)

// childLogs are where the child processes write, and the names of those
// logs for messages.
type childLogs struct {
	managers      []io.Writer
	managerNames  []string
	controllerMgr io.Writer
	controllerLog string
}

// startProcesses is step 4: Cluster API's managers as child processes and
// our modules in-process, side by side: none needs another to start.
func (e *Environment) startProcesses(ctx context.Context, p *plan) error {
	if err := e.setWebhookServer(p); err != nil {
		return err
	}
	logs, err := e.openChildLogs(p)
	if err != nil {
		return err
	}
	errs := make([]error, len(p.managers)+2)
	var wg sync.WaitGroup
	for i := range p.managers {
		wg.Go(func() { errs[i] = e.startCAPIManager(ctx, p, i, logs) })
	}
	if p.controllerManagerBinary != "" {
		wg.Go(func() { errs[len(p.managers)+1] = e.startControllerManager(ctx, p, logs) })
	}
	wg.Go(func() {
		done := p.display.Step("capi-monolith modules " + fmt.Sprint(e.Modules) + " (in-process)")
		errs[len(p.managers)] = e.startManager(ctx, p.mgrOpts, p.enabled)
		done(errs[len(p.managers)])
	})
	wg.Wait()
	e.Core = e.Managers[0]
	return errors.Join(errs...)
}

// setWebhookServer gives our manager's webhook server a free port and the
// certificate of step 3, and turns its leader election off.
func (e *Environment) setWebhookServer(p *plan) error {
	port, err := ports.One()
	if err != nil {
		return err
	}
	p.mgrOpts.WebhookPort = port
	p.mgrOpts.WebhookCertDir = p.certDir
	p.mgrOpts.WebhookCertName = certs.CertFile
	p.mgrOpts.WebhookKeyName = certs.KeyFile
	p.mgrOpts.LeaderElect = false
	e.WebhookAddress = net.JoinHostPort(p.webhookHost, strconv.Itoa(p.mgrOpts.WebhookPort))
	return nil
}

// openChildLogs opens every child's log. Every log is open before any
// process starts: a failure here leaves nothing running.
func (e *Environment) openChildLogs(p *plan) (childLogs, error) {
	logs := childLogs{managers: make([]io.Writer, len(p.managers)), managerNames: make([]string, len(p.managers))}
	var err error
	for i, m := range p.managers {
		if logs.managers[i], logs.managerNames[i], err = e.childOutput(p.logDir, "capi-"+m.Name, m.Title); err != nil {
			return childLogs{}, err
		}
	}
	if p.controllerManagerBinary != "" {
		if logs.controllerMgr, logs.controllerLog, err = e.childOutput(p.logDir, controllermanager.BinaryName, controllermanager.BinaryName); err != nil {
			return childLogs{}, err
		}
	}
	return logs, nil
}

// startCAPIManager starts the i-th of Cluster API's managers, supervised.
func (e *Environment) startCAPIManager(ctx context.Context, p *plan, i int, logs childLogs) error {
	m := p.managers[i]
	done := p.display.Step(m.Title + " " + p.capi.Version + " (child process)")
	var err error
	e.Managers[i], err = capimanager.Start(ctx, capimanager.Options{
		Manager:                  m,
		Config:                   e.Config,
		BinaryPath:               p.binaries[i],
		Output:                   logs.managers[i],
		WorkDir:                  filepath.Join(e.StateDir, "capi-"+m.Name),
		Certs:                    e.Certs,
		WebhookConfigurationName: webhookConfigurationPrefix + m.Name,
		FeatureGates:             p.opts.FeatureGates,
		ExtraArgs:                p.opts.CAPITuning.Args(m),
		Restarts:                 managerRestarts,
		Owner:                    e.owner,
		OnStart:                  func(pid int) { e.record("capi-"+m.Name, pid) },
		OnExit: func(err error, restarting bool) {
			if restarting {
				p.display.Printf("  ! %s exited (%v): restarting it\n", m.Title, err)
				return
			}
			e.fail(fmt.Errorf("%s exited and was restarted %d times already: %w (its output: %s)", m.Title, managerRestarts, err, logs.managerNames[i]))
		},
	})
	done(err)
	return err
}

// startControllerManager starts kube-controller-manager, supervised.
func (e *Environment) startControllerManager(ctx context.Context, p *plan, logs childLogs) error {
	done := p.display.Step("kube-controller-manager " + controlplane.KubernetesVersion + " (child process: garbage collector, namespace controller)")
	var err error
	e.ControllerManager, err = controllermanager.Start(ctx, controllermanager.Options{
		BinaryPath: p.controllerManagerBinary,
		Config:     e.Config,
		WorkDir:    filepath.Join(e.StateDir, controllermanager.BinaryName),
		Certs:      e.Certs,
		Output:     logs.controllerMgr,
		Restarts:   managerRestarts,
		OnStart:    func(pid int) { e.record(controllermanager.BinaryName, pid) },
		OnExit: func(err error, restarting bool) {
			if restarting {
				p.display.Printf("  ! kube-controller-manager exited (%v): restarting it\n", err)
				return
			}
			e.fail(fmt.Errorf("kube-controller-manager exited and was restarted %d times already: %w (its output: %s)", managerRestarts, err, logs.controllerLog))
		},
	})
	done(err)
	return err
}
