package store

import (
	"fmt"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// MaxObjectBytes is the largest object the store keeps, measured as its
// JSON: etcd's default --max-request-bytes (1.5 MiB), which bounds what
// kube-apiserver can store.
const MaxObjectBytes = 3 << 19

// Defaults of Limits.
const (
	DefaultMaxObjects          = 10000
	DefaultMaxBytes            = 64 << 20
	DefaultMaxWatches          = 1000
	DefaultMaxRequestsInFlight = 100
)

// Limits bound one workload cluster, so that no cluster takes the
// process's memory or its share of the serving, whatever its clients do.
type Limits struct {
	// MaxObjects is how many objects the store holds; a create past it is
	// 403 Forbidden, as a ResourceQuota's "exceeded quota". Default
	// DefaultMaxObjects.
	MaxObjects int
	// MaxBytes bounds the JSON size of all the objects together; a create
	// or an update that grows them past it is 403 Forbidden. Default
	// DefaultMaxBytes.
	MaxBytes int64
	// MaxWatches is how many watches may be open; one more is 429
	// TooManyRequests with Retry-After. Default DefaultMaxWatches.
	MaxWatches int
	// MaxRequestsInFlight is how many requests other than watches
	// (StartRequest) may be served at once; one more is 429
	// TooManyRequests with Retry-After, as kube-apiserver's API Priority
	// and Fairness answers. Default DefaultMaxRequestsInFlight.
	MaxRequestsInFlight int
}

func (l Limits) withDefaults() Limits {
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultMaxObjects
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxWatches <= 0 {
		l.MaxWatches = DefaultMaxWatches
	}
	if l.MaxRequestsInFlight <= 0 {
		l.MaxRequestsInFlight = DefaultMaxRequestsInFlight
	}
	return l
}

// Quota names in the 403 Forbidden a limit is answered with: the flags
// that set them.
const (
	QuotaObjects = "inmemory-workload-max-objects"
	QuotaBytes   = "inmemory-workload-max-bytes"
)

// retryAfterSeconds is what a 429 tells clients to wait, as kube-apiserver's
// API Priority and Fairness does.
const retryAfterSeconds = 1

// limitState is what the limits count.
type limitState struct {
	bytes    int64 // JSON size of the stored objects; guarded by s.mu
	inFlight atomic.Int64
}

// Usage is what a store holds and serves.
type Usage struct {
	Objects          int
	Bytes            int64
	Watches          int
	RequestsInFlight int
}

// Usage returns what the store holds and serves now.
func (s *Store) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Usage{Objects: len(s.objects), Bytes: s.lim.bytes, Watches: len(s.watchers), RequestsInFlight: int(s.lim.inFlight.Load())}
}

// StartRequest counts a request in flight until done is called; past
// Limits.MaxRequestsInFlight it is 429 TooManyRequests (Retry-After), so a
// flooded cluster sheds its own load and no other's.
func (s *Store) StartRequest() (done func(), err error) {
	if s.lim.inFlight.Add(1) > int64(s.opts.Limits.MaxRequestsInFlight) {
		s.lim.inFlight.Add(-1)
		return nil, apierrors.NewTooManyRequests("Too many requests, please try again later.", retryAfterSeconds)
	}
	return func() { s.lim.inFlight.Add(-1) }, nil
}

// admitWatchLocked refuses a watch past Limits.MaxWatches.
func (s *Store) admitWatchLocked() error {
	if len(s.watchers) >= s.opts.Limits.MaxWatches {
		return apierrors.NewTooManyRequests(
			fmt.Sprintf("too many watches open on this cluster (limit %d, --inmemory-workload-max-watches), please try again later", s.opts.Limits.MaxWatches),
			retryAfterSeconds)
	}
	return nil
}

// admitLocked checks a write of obj (replacing old, nil for a create)
// against the object size limit and the cluster's quotas, and returns
// obj's encoding, which the write stores. An object too large with
// managedFields is stored without them, as kube-apiserver retries such a
// write.
func (s *Store) admitLocked(res Resource, obj *unstructured.Unstructured, old *entry) ([]byte, error) {
	raw := encode(obj)
	if len(raw) > MaxObjectBytes && len(obj.GetManagedFields()) > 0 {
		obj.SetManagedFields(nil)
		raw = encode(obj)
	}
	size := int64(len(raw))
	if size > MaxObjectBytes {
		return nil, tooLargeObject(res, obj, size)
	}
	l := s.opts.Limits
	if old == nil && len(s.objects) >= l.MaxObjects {
		return nil, exceededQuota(res, obj.GetName(), QuotaObjects, "objects", 1, int64(len(s.objects)), int64(l.MaxObjects))
	}
	grow := size
	if old != nil {
		grow -= int64(len(old.raw))
	}
	if grow > 0 && s.lim.bytes+grow > l.MaxBytes {
		return nil, exceededQuota(res, obj.GetName(), QuotaBytes, "bytes", grow, s.lim.bytes, l.MaxBytes)
	}
	return raw, nil
}

// tooLargeObject is the answer to an object larger than MaxObjectBytes:
// 413, as kube-apiserver answers a request body past its limit (a real one
// passes etcd's "request is too large" on as a 500; see
// docs/workload-api.md).
func tooLargeObject(res Resource, obj *unstructured.Unstructured, size int64) error {
	err := apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
		"%s %q is %d bytes, more than the %d bytes an object may take (etcdserver: request is too large)",
		res.GroupResource(), obj.GetName(), size, MaxObjectBytes))
	err.ErrStatus.Details = &metav1.StatusDetails{Name: obj.GetName(), Group: res.Group, Kind: res.Resource}
	return err
}

// exceededQuota is a ResourceQuota's answer: 403 Forbidden, "exceeded
// quota: <name>, requested: ..., used: ..., limited: ...".
func exceededQuota(res Resource, name, quota, what string, requested, used, limited int64) error {
	return apierrors.NewForbidden(res.GroupResource(), name, fmt.Errorf(
		"exceeded quota: %s, requested: %s=%d, used: %s=%d, limited: %s=%d", quota, what, requested, what, used, what, limited))
}

func newInvalid(obj *unstructured.Unstructured, errs field.ErrorList) error {
	return apierrors.NewInvalid(obj.GroupVersionKind().GroupKind(), obj.GetName(), errs)
}

// limitsObserve keeps the byte count; emit calls it with s.mu held.
func (s *Store) limitsObserve(e event) {
	switch e.typ {
	case watch.Added:
		s.lim.bytes += int64(len(e.cur.raw))
	case watch.Modified:
		s.lim.bytes += int64(len(e.cur.raw)) - int64(len(e.old.raw))
	case watch.Deleted:
		s.lim.bytes -= int64(len(e.old.raw))
	}
}
