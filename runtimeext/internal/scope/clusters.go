// Resolving the request's Cluster: the hook paths have no client
// authentication by default (Cluster API's own extensions have none either),
// so the request's copy of the Cluster is not trusted. The Cluster must exist
// with the request's UID, in the manager's cache (which --namespace bounds)
// or, when the cache does not have it yet, past it; handlers then act on
// the stored Cluster. An unauthenticated caller can
// thus neither make the manager write Events into arbitrary namespaces nor
// learn the pools and free addresses of a namespace from a made-up topology;
// it can only ask about Clusters whose UID it already knows.

package scope

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ErrNotInScope is returned for a request Cluster the extension does not
// serve.
var ErrNotInScope = errors.New("not a Cluster this extension serves")

// Clusters resolves request Clusters against Reader.
type Clusters struct {
	// Reader reads Clusters: the manager's cached client.
	Reader client.Reader
	// APIReader, when set, reads a Cluster past the cache when the cache
	// does not have it with the request's UID: a Cluster created a moment
	// ago (its BeforeClusterCreate comes at once) or re-created under its
	// name. Nil trusts the cache alone.
	APIReader client.Reader
}

// Resolve returns the stored Cluster with the namespace, name and UID of
// req, or an error wrapping ErrNotInScope (it names only what the caller
// sent). Other read errors are returned as they are.
func (c *Clusters) Resolve(ctx context.Context, req *clusterv1.Cluster) (*clusterv1.Cluster, error) {
	if req == nil || req.Name == "" || req.Namespace == "" || req.UID == "" {
		return nil, fmt.Errorf("the request's Cluster must have a namespace, a name and a UID: %w", ErrNotInScope)
	}
	stored := &clusterv1.Cluster{}
	err := c.Reader.Get(ctx, client.ObjectKeyFromObject(req), stored)
	if c.APIReader != nil && (apierrors.IsNotFound(err) || (err == nil && stored.UID != req.UID)) {
		// The cache may lag behind the Cluster Cluster API calls about.
		stored = &clusterv1.Cluster{}
		err = c.APIReader.Get(ctx, client.ObjectKeyFromObject(req), stored)
	}
	if apierrors.IsNotFound(err) || (err == nil && stored.UID != req.UID) {
		return nil, fmt.Errorf("Cluster %s/%s with UID %s: %w", req.Namespace, req.Name, req.UID, ErrNotInScope)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read Cluster %s/%s: %w", req.Namespace, req.Name, err)
	}
	return stored, nil
}
