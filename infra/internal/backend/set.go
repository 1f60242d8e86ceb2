package backend

import (
	"errors"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// ErrUnavailable is returned for a backend this process cannot run, e.g.
// docker without a reachable Docker Engine.
var ErrUnavailable = errors.New("backend not available in this process")

// ErrEndpointInUse is wrapped by ReconcileCluster when the cluster's
// recorded control plane endpoint is held by another process for now
// (after `clusterctl move`, the source's manager until it lets go): the
// caller reports it and tries again shortly, not with an error's backoff.
var ErrEndpointInUse = errors.New("the control plane endpoint is in use by another process")

// Set holds one backend per kind; a nil one is unavailable.
type Set struct {
	Docker   Backend
	InMemory Backend
}

// ForCluster returns the backend a MonolithCluster asks for.
func (s Set) ForCluster(spec v1alpha1.ClusterBackend) (Backend, error) {
	return s.pick(spec.Docker != nil, spec.InMemory != nil)
}

// ForMachine returns the backend a MonolithMachine asks for.
func (s Set) ForMachine(spec v1alpha1.MachineBackend) (Backend, error) {
	return s.pick(spec.Docker != nil, spec.InMemory != nil)
}

func (s Set) pick(docker, inMemory bool) (Backend, error) {
	switch {
	case docker && inMemory, !docker && !inMemory:
		return nil, errors.New("exactly one of backend.docker and backend.inMemory must be set")
	case docker && s.Docker != nil:
		return s.Docker, nil
	case inMemory && s.InMemory != nil:
		return s.InMemory, nil
	case docker:
		return nil, errors.Join(errors.New("the docker backend"), ErrUnavailable)
	}
	return nil, errors.Join(errors.New("the inMemory backend"), ErrUnavailable)
}
