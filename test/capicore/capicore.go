package capicore

import (
	"context"

	"github.com/capi-monolith/capi-monolith/dev/capicore"
)

const (
	// DefaultFeatureGates turns on what later suites need from core.
	DefaultFeatureGates = capicore.DefaultFeatureGates
	// DefaultStartTimeout bounds Start's wait for the process to be ready.
	DefaultStartTimeout = capicore.DefaultStartTimeout
)

// Options configures Start (see dev/capicore.Options).
type Options = capicore.Options

// Process is a running Cluster API core manager.
type Process = capicore.Process

// Start installs Cluster API core's webhook configurations and conversion
// webhooks pointing at a new process, runs the process and waits until it is
// ready. ctx bounds Start only; the process runs until Stop.
func Start(ctx context.Context, opts Options) (*Process, error) {
	return capicore.Start(ctx, opts)
}
