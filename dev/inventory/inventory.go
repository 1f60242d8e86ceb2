// Package inventory records the providers a dev environment runs in
// clusterctl's inventory, as `clusterctl init` would have: the
// providers.clusterctl.cluster.x-k8s.io CRD, a Namespace per provider and
// one Provider object each, labelled as clusterctl labels them. clusterctl
// and Cluster API's e2e framework read the inventory to find the installed
// providers and their versions (`clusterctl generate cluster` without a
// version, `describe provider`, `upgrade plan`, `move`).
package inventory

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/config"

	"github.com/capi-monolith/capi-monolith/dev/crds"
)

// Provider is one provider to record.
type Provider struct {
	// Name is clusterctl's provider name, e.g. cluster-api, kubeadm, monolith.
	Name string
	// Type is clusterctl's provider type, e.g. CoreProvider.
	Type clusterctlv1.ProviderType
	// Version is the version installed, e.g. v1.14.2.
	Version string
	// Namespace is the namespace clusterctl would have installed it in.
	Namespace string
}

// Label is clusterctl's <type>-<name> of the provider: the Provider
// object's name and the cluster.x-k8s.io/provider label of what it installs.
func (p Provider) Label() string {
	return clusterctlv1.ManifestLabel(p.Name, p.Type)
}

// Labels are the labels clusterctl puts on everything it installs for p.
func (p Provider) Labels() map[string]string {
	return map[string]string{
		clusterctlv1.ClusterctlLabel: "",
		clusterv1.ProviderNameLabel:  p.Label(),
	}
}

// Write installs clusterctl's inventory CRD and records every provider with
// its Namespace. A provider recorded already (an earlier run on the same
// data, or a cluster clusterctl initialised) is left as it is: the
// inventory then says what that installation says.
func Write(ctx context.Context, cfg *rest.Config, c client.Client, providers []Provider) error {
	list, err := crds.Decode(clusterctlconfig.ClusterctlAPIManifest, "clusterctl's inventory CRD")
	if err != nil {
		return err
	}
	for _, crd := range list {
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels[clusterctlv1.ClusterctlCoreLabel] = clusterctlv1.ClusterctlCoreLabelInventoryValue
		crd.Labels[clusterctlv1.ClusterctlLabel] = ""
	}
	if err := crds.Install(ctx, cfg, list); err != nil {
		return fmt.Errorf("failed to install clusterctl's inventory CRD: %w", err)
	}
	for _, p := range providers {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace, Labels: p.Labels()}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create namespace %s of provider %s: %w", p.Namespace, p.Label(), err)
		}
		obj := &clusterctlv1.Provider{
			ObjectMeta:   metav1.ObjectMeta{Name: p.Label(), Namespace: p.Namespace, Labels: p.Labels()},
			ProviderName: p.Name,
			Type:         string(p.Type),
			Version:      p.Version,
		}
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to record provider %s in clusterctl's inventory: %w", p.Label(), err)
		}
	}
	return nil
}
