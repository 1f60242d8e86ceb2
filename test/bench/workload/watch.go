package main

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
)

// watchClusters starts informers, unthrottled, for the Clusters, Machines,
// KubeadmControlPlanes and MonolithClusters of namespace and returns their
// copy once the first lists are in. They start before any cluster exists,
// so the apiserver only ever streams changes to them; they stop with ctx.
func watchClusters(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string) (client.Reader, error) {
	informers, err := cache.New(harness.Unthrottled.Config(cfg), cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the informers: %w", err)
	}
	for _, obj := range []client.Object{&clusterv1.Cluster{}, &clusterv1.Machine{}, &controlplanev1.KubeadmControlPlane{}, &infrav1.MonolithCluster{}} {
		if _, err := informers.GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("failed to watch %T: %w", obj, err)
		}
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		return nil, errors.Join(errors.New("failed to list the Clusters, Machines, KubeadmControlPlanes and MonolithClusters to watch"), ctx.Err())
	}
	return informers, nil
}
