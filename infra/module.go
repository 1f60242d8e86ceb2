// Package infra is the infra module of capi-monolith: the docker-like
// infrastructure provider, with MonolithCluster and MonolithMachine
// (Cluster API's InfraCluster and InfraMachine) provisioned by a docker or
// an inMemory backend.
package infra

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/backend"
	"github.com/capi-monolith/capi-monolith/infra/backend/docker"
	"github.com/capi-monolith/capi-monolith/infra/backend/inmemory"
	"github.com/capi-monolith/capi-monolith/infra/reconcilers/cluster"
	"github.com/capi-monolith/capi-monolith/infra/reconcilers/machine"
	"github.com/capi-monolith/capi-monolith/infra/tasks"
	"github.com/capi-monolith/capi-monolith/infra/webhooks"
	"github.com/capi-monolith/capi-monolith/modules"
)

// Name is the value of --enable-modules that turns this module on.
const Name = "infra"

// Module is the infra module. Its zero value is ready to use; BindFlags
// exposes the docker backend's settings on the command line.
type Module struct {
	docker docker.Options
}

var (
	_ modules.Module     = &Module{}
	_ modules.FlagBinder = &Module{}
)

// Name implements modules.Module.
func (*Module) Name() string { return Name }

// BindFlags implements modules.FlagBinder.
func (m *Module) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&m.docker.NodeImageRepository, "docker-node-image-repository", docker.DefaultNodeImageRepository,
		"Image repository of docker nodes whose spec names no image; the tag is the Machine's Kubernetes version.")
	fs.StringVar(&m.docker.LoadBalancerHostIP, "docker-load-balancer-host-ip", docker.DefaultLoadBalancerHostIP,
		"Host address the docker backend publishes control plane load balancers on (0.0.0.0 for every interface).")
	fs.BoolVar(&m.docker.UnprivilegedNodes, "docker-unprivileged-nodes", false,
		"Run docker node containers without privileged mode, where the Docker daemon refuses it; kindest/node images need it.")
}

// AddToScheme implements modules.Module: our kinds, and Cluster API's IPAM
// types for the machines' address claims.
func (*Module) AddToScheme(scheme *runtime.Scheme) error {
	if err := ipamv1.AddToScheme(scheme); err != nil {
		return err
	}
	return v1alpha1.AddToScheme(scheme)
}

// SetupWithManager implements modules.Module.
func (m *Module) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts modules.Options) error {
	backends := backend.Set{InMemory: inmemory.New(inmemory.Options{})}
	// The docker backend connects on first use: without a Docker Engine,
	// only objects asking for it fail, and say why in their conditions.
	d, err := docker.New(m.docker)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "The docker backend is unavailable")
	} else {
		backends.Docker = d
	}
	bootstraps := tasks.New(context.Background())
	if err := mgr.Add(bootstraps); err != nil {
		return fmt.Errorf("failed to add the bootstrap task manager: %w", err)
	}
	if opts.WebhooksEnabled {
		if err := webhooks.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("failed to set up the infra webhooks: %w", err)
		}
	}
	options := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	if err := (&cluster.Reconciler{Client: mgr.GetClient(), Backends: backends, WatchFilterValue: opts.WatchFilterValue}).
		SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the MonolithCluster controller: %w", err)
	}
	if err := (&machine.Reconciler{Client: mgr.GetClient(), Backends: backends, Tasks: bootstraps, WatchFilterValue: opts.WatchFilterValue}).
		SetupWithManager(ctx, mgr, options); err != nil {
		return fmt.Errorf("failed to set up the MonolithMachine controller: %w", err)
	}
	return nil
}
