package infra

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/infra/internal/backend/docker"
)

// identityNamespace is the namespace whose UID identifies the management
// cluster: every cluster has it, it is never deleted, and its UID differs
// between clusters (two `dev` runs, dev and the tests).
const identityNamespace = "kube-system"

// identityWait bounds the wait for a just-started API server to create
// kube-system (its bootstrap controller does so shortly after serving).
const identityWait = 30 * time.Second

// The default identity is read once, before the manager starts; only this
// one namespace is ever read.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get,resourceNames=kube-system

// managementClusterIdentity returns flag when set, else the UID of the
// kube-system namespace read through reader (the manager's API reader,
// usable before the manager starts).
func managementClusterIdentity(ctx context.Context, reader client.Reader, flag string) (string, error) {
	if flag != "" {
		if err := docker.ValidateManagementCluster(flag); err != nil {
			return "", fmt.Errorf("invalid --docker-management-cluster: %w", err)
		}
		return flag, nil
	}
	ns := &corev1.Namespace{}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, identityWait, true, func(ctx context.Context) (bool, error) {
		err := reader.Get(ctx, client.ObjectKey{Name: identityNamespace}, ns)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return "", fmt.Errorf("failed to read the %s namespace's UID, the docker backend's management cluster identity (or set --docker-management-cluster): %w", identityNamespace, err)
	}
	ctrl.LoggerFrom(ctx).Info("Docker backend management cluster identity", "identity", ns.UID, "from", "namespace/"+identityNamespace)
	return string(ns.UID), nil
}
