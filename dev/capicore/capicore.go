// Package capicore is Cluster API core's manager as a supervised child
// process: dev/capimanager with capimanager.Core, under the names the test
// suites (test/capicore, test/envtest) use.
package capicore

import (
	"context"

	"github.com/capi-monolith/capi-monolith/dev/capimanager"
	"github.com/capi-monolith/capi-monolith/dev/toolcache"
)

const (
	// DefaultFeatureGates turns on what the dev environment and the suites
	// need from core.
	DefaultFeatureGates = capimanager.DefaultFeatureGates
	// DefaultStartTimeout bounds Start's wait for the process to be ready.
	DefaultStartTimeout = capimanager.DefaultStartTimeout
)

// Options configures Start; its Manager is always core.
type Options = capimanager.Options

// Process is a running Cluster API core manager.
type Process = capimanager.Process

// Start runs Cluster API core's manager (see capimanager.Start).
func Start(ctx context.Context, opts Options) (*Process, error) {
	opts.Manager = capimanager.Core
	return capimanager.Start(ctx, opts)
}

// CacheDir returns the folder where the project caches the binaries it
// builds (see toolcache.Dir).
func CacheDir() (string, error) { return toolcache.Dir() }
