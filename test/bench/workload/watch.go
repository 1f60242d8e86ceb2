package main

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
)

// watchClusters starts informers, unthrottled, for the Clusters, Machines,
// KubeadmControlPlanes, KubeadmConfigs and MonolithClusters of namespace and
// returns their copy once the first lists are in, and what counts their
// changes. They start before any cluster exists, so the apiserver only ever
// streams changes to them; they stop with ctx.
func watchClusters(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string) (client.Reader, *changeCounter, error) {
	informers, err := cache.New(harness.Unthrottled.Config(cfg), cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to create the informers: %w", err)
	}
	changes := newChangeCounter()
	for _, watched := range []struct {
		kind string
		obj  client.Object
	}{
		{"Cluster", &clusterv1.Cluster{}},
		{"Machine", &clusterv1.Machine{}},
		{"KubeadmControlPlane", &controlplanev1.KubeadmControlPlane{}},
		{"KubeadmConfig", &bootstrapv1.KubeadmConfig{}},
		{"MonolithCluster", &infrav1.MonolithCluster{}},
	} {
		informer, err := informers.GetInformer(ctx, watched.obj)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to watch %ss: %w", watched.kind, err)
		}
		if _, err := informer.AddEventHandler(changes.handler(watched.kind)); err != nil {
			return nil, nil, fmt.Errorf("failed to count the changes of %ss: %w", watched.kind, err)
		}
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		return nil, nil, errors.Join(errors.New("failed to list the Clusters, Machines, KubeadmControlPlanes, KubeadmConfigs and MonolithClusters to watch"), ctx.Err())
	}
	return informers, changes, nil
}
