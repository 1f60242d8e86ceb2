package dev

import (
	"os"

	"github.com/capi-monolith/capi-monolith/dev/capimanager"
	"github.com/capi-monolith/capi-monolith/dev/capimodule"
	"github.com/capi-monolith/capi-monolith/dev/controlplane"
	"github.com/capi-monolith/capi-monolith/dev/ports"
	"github.com/capi-monolith/capi-monolith/dev/progress"
	"github.com/capi-monolith/capi-monolith/dev/state"
	"github.com/capi-monolith/capi-monolith/dev/toolcache"
	"github.com/capi-monolith/capi-monolith/manager"
	"github.com/capi-monolith/capi-monolith/modules"
)

// plan is what Start checked and found before anything runs, and what its
// steps hand on to the next ones.
type plan struct {
	opts    Options
	display *progress.Display
	// mgrOpts are the manager's options; the processes step sets its
	// webhook server.
	mgrOpts manager.Options
	enabled []modules.Module
	capi    capimodule.Module
	// managers are Cluster API's managers, binaries their binaries.
	managers []capimanager.Manager
	binaries []string
	// controllerManagerBinary is kube-controller-manager, empty when dev
	// runs without it.
	controllerManagerBinary string

	// Set by claimState: the logs' folder, and the --data-dir etcd keeps
	// its data in (empty: none).
	logDir   string
	keptData string
	// Set by writeCerts: where the webhook servers' certificate is, and
	// the host the apiserver and core call our webhook server at.
	certDir     string
	webhookHost string
}

// prepare fills opts' defaults, rejects bad input before anything runs and
// finds the binaries dev runs; then it removes what a dev killed earlier
// left behind.
func prepare(opts Options) (*plan, error) {
	if opts.ExtensionConfigName == "" {
		opts.ExtensionConfigName = DefaultExtensionConfigName
	}
	if opts.CacheDir == "" {
		dir, err := toolcache.Dir()
		if err != nil {
			return nil, err
		}
		opts.CacheDir = dir
	}
	p := &plan{opts: opts, display: opts.Progress}

	// Bad input fails before anything runs.
	p.mgrOpts = DefaultManagerOptions(opts.Modules)
	if opts.Manager != nil {
		p.mgrOpts = *opts.Manager
	}
	if err := p.mgrOpts.Validate(); err != nil {
		return nil, err
	}
	if err := opts.CAPITuning.Validate(); err != nil {
		return nil, err
	}
	// The ports dev picks for its children must not be ones our manager
	// will bind after they start.
	if err := ports.Reserve(p.mgrOpts.HealthAddr, p.mgrOpts.Diagnostics.DiagnosticsAddress); err != nil {
		return nil, err
	}
	p.enabled = withoutRegistration(opts.Modules)
	if err := modules.Check(p.enabled); err != nil {
		return nil, err
	}
	if err := p.findBinaries(); err != nil {
		return nil, err
	}

	// A dev killed earlier (kill -9, a crash) left its temporary state
	// folder, with keys and etcd's data in it, and maybe processes: remove
	// them now (only this user's own: see state.CleanStale).
	removed, err := state.CleanStale(os.TempDir(), TempStatePrefix)
	for _, dir := range removed {
		p.display.Printf("  removed the state of a killed capi-monolith dev: %s\n", dir)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// findBinaries finds the pinned Cluster API module, its managers' binaries
// and, when dev starts its own control plane, kube-controller-manager.
func (p *plan) findBinaries() error {
	var err error
	if p.capi, err = capimodule.Locate(); err != nil {
		return err
	}
	p.managers = capimanager.All()
	p.binaries = make([]string, len(p.managers))
	for i, m := range p.managers {
		if p.binaries[i], err = m.Find(p.opts.Binaries[m.Name], p.opts.CacheDir, p.capi.Version); err != nil {
			return err
		}
	}
	if p.opts.Kubeconfig == "" {
		assets, err := controlplane.AssetsDirectory("", p.opts.CacheDir)
		if err != nil {
			return err
		}
		if p.controllerManagerBinary, err = findControllerManager(assets, p.display); err != nil {
			return err
		}
	}
	return nil
}
