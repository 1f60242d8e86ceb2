package infra

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/hosting"
)

// leaderLease is the Lease whose holderIdentity is the address of the
// replica serving the workload APIs. It is no lock (leader election is the
// manager's): the leader writes it once it serves, followers read it.
type leaderLease struct {
	client client.Client
	key    types.NamespacedName
}

func (l leaderLease) leadership(elected <-chan struct{}, self string) *hosting.Leadership {
	return &hosting.Leadership{Elected: elected, Self: self, Publish: l.publish, Leader: l.leader}
}

func (l leaderLease) publish(ctx context.Context, address string) error {
	lease := &coordinationv1.Lease{}
	err := l.client.Get(ctx, l.key, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.key.Namespace, Name: l.key.Name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(address), AcquireTime: ptr.To(metav1.NowMicro())},
		}
		if err := l.client.Create(ctx, lease); err != nil {
			return fmt.Errorf("failed to create Lease %s: %w", l.key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read Lease %s: %w", l.key, err)
	}
	lease.Spec.HolderIdentity = ptr.To(address)
	lease.Spec.AcquireTime = ptr.To(metav1.NowMicro())
	if err := l.client.Update(ctx, lease); err != nil {
		return fmt.Errorf("failed to update Lease %s: %w", l.key, err)
	}
	return nil
}

func (l leaderLease) leader(ctx context.Context) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := l.client.Get(ctx, l.key, lease); err != nil {
		return "", fmt.Errorf("failed to read Lease %s: %w", l.key, err)
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}
