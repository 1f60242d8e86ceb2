// Package backendset builds the backend.Set of a manager: the one inMemory
// backend and the one docker backend that every MonolithCluster and
// MonolithMachine of the process (pool instances included) are provisioned
// through.
package backendset

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend/docker"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend/inmemory"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
)

// Options configure the backends; the zero value gives every default.
type Options struct {
	Docker docker.Options
	// Workload serves the inMemory clusters' workload API; nil for none.
	Workload *hosting.Hosting
}

// New returns the backends: inMemory always, docker unless its client
// cannot be built (then it is logged, and only objects asking for docker
// fail, saying why in their conditions). The docker backend connects on
// first use.
func New(ctx context.Context, opts Options) backend.Set {
	set := backend.Set{InMemory: inmemory.New(inmemory.Options{Workload: opts.Workload})}
	d, err := docker.New(opts.Docker)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "The docker backend is unavailable")
		return set
	}
	set.Docker = d
	return set
}
