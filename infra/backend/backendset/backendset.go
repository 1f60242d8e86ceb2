// Package backendset builds the backend.Set that the infra and machinepool
// modules drive, from the docker backend's command-line flags. Both
// modules bind the flags on the binary's one flag set: the first binding
// defines them, the second shares their values, so that
// --docker-node-image-repository and its siblings configure every module's
// docker backend alike.
package backendset

import (
	"context"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/infra/backend"
	"github.com/capi-monolith/capi-monolith/infra/backend/docker"
	"github.com/capi-monolith/capi-monolith/infra/backend/inmemory"
)

// Options configure the backends; the zero value gives every default.
type Options struct {
	Docker docker.Options
}

// BindFlags binds the backends' flags to fs. Called again on the same fs
// (by another module), it defines nothing new: o then receives every value
// the flags are set to, starting from the same defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	bind(fs, "docker-node-image-repository", func(s *pflag.FlagSet, name string) {
		s.StringVar(&o.Docker.NodeImageRepository, name, docker.DefaultNodeImageRepository,
			"Image repository of docker nodes whose spec names no image; the tag is the Machine's Kubernetes version.")
	})
	bind(fs, "docker-load-balancer-host-ip", func(s *pflag.FlagSet, name string) {
		s.StringVar(&o.Docker.LoadBalancerHostIP, name, docker.DefaultLoadBalancerHostIP,
			"Host address the docker backend publishes control plane load balancers on (0.0.0.0 for every interface).")
	})
	bind(fs, "docker-unprivileged-nodes", func(s *pflag.FlagSet, name string) {
		s.BoolVar(&o.Docker.UnprivilegedNodes, name, false,
			"Run docker node containers without privileged mode, where the Docker daemon refuses it; kindest/node images need it.")
	})
}

// bind defines the flag name on fs with define, or, when fs has it already,
// defines it on a scratch set and makes fs's flag set both values.
func bind(fs *pflag.FlagSet, name string, define func(*pflag.FlagSet, string)) {
	existing := fs.Lookup(name)
	if existing == nil {
		define(fs, name)
		return
	}
	scratch := pflag.NewFlagSet(name, pflag.ContinueOnError)
	define(scratch, name)
	existing.Value = tee{Value: existing.Value, also: scratch.Lookup(name).Value}
}

// tee is a flag value that sets a second value with the first.
type tee struct {
	pflag.Value
	also pflag.Value
}

func (t tee) Set(s string) error {
	if err := t.Value.Set(s); err != nil {
		return err
	}
	return t.also.Set(s)
}

// New returns the backends: inMemory always, docker unless its client
// cannot be built (then it is logged, and only objects asking for docker
// fail, saying why in their conditions). The docker backend connects on
// first use.
func New(ctx context.Context, opts Options) backend.Set {
	set := backend.Set{InMemory: inmemory.New(inmemory.Options{})}
	d, err := docker.New(opts.Docker)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "The docker backend is unavailable")
		return set
	}
	set.Docker = d
	return set
}
