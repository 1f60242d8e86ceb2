package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WatchFunc is called for each object a watch sees; returning true ends the
// watch.
type WatchFunc func(event watch.EventType, obj client.Object) (done bool, err error)

// WatchEach lists the objects of list's kind that opts select, hands each to
// fn as an Added event, then watches from the list's resource version and
// hands fn every event, until fn returns true, fn fails or ctx ends. A watch
// closed by the server is resumed where it stopped; an expired one
// (410 Gone) is replaced by a new list and watch, its items handed to fn as
// Modified events. Unlike an informer it keeps no copy of the objects, so
// that it adds little to the memory a benchmark measures.
func WatchEach(ctx context.Context, c client.WithWatch, list client.ObjectList, fn WatchFunc, opts ...client.ListOption) error {
	rv, done, err := relist(ctx, c, list, watch.Added, fn, opts)
	for !done && err == nil {
		var expired bool
		if rv, done, expired, err = watchFrom(ctx, c, list, rv, fn, opts); expired && err == nil {
			rv, done, err = relist(ctx, c, list, watch.Modified, fn, opts)
		}
	}
	return err
}

func relist(ctx context.Context, c client.WithWatch, list client.ObjectList, as watch.EventType, fn WatchFunc, opts []client.ListOption) (string, bool, error) {
	l := list.DeepCopyObject().(client.ObjectList)
	if err := c.List(ctx, l, opts...); err != nil {
		return "", false, fmt.Errorf("failed to list %T: %w", list, err)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return "", false, fmt.Errorf("failed to read the items of %T: %w", list, err)
	}
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			return "", false, fmt.Errorf("list item %T is not an object", item)
		}
		if done, err := fn(as, obj); done || err != nil {
			return "", done, err
		}
	}
	return l.GetResourceVersion(), false, nil
}

// watchFrom watches from rv until fn is done, the watch ends or expires.
// It returns the last resource version seen.
func watchFrom(ctx context.Context, c client.WithWatch, list client.ObjectList, rv string, fn WatchFunc, opts []client.ListOption) (last string, done, expired bool, err error) {
	last = rv
	raw := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}}
	w, err := c.Watch(ctx, list, append(append([]client.ListOption{}, opts...), raw)...)
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return last, false, true, nil
		}
		return last, false, false, fmt.Errorf("failed to watch %T: %w", list, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return last, false, false, fmt.Errorf("stopped watching %T: %w", list, context.Cause(ctx))
		case ev, ok := <-w.ResultChan():
			if !ok {
				return last, false, false, nil // closed by the server: resume
			}
			switch ev.Type {
			case watch.Error:
				status := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(status) || apierrors.IsGone(status) || statusCode(status) == http.StatusGone {
					return last, false, true, nil
				}
				return last, false, false, fmt.Errorf("failed to watch %T: %w", list, status)
			case watch.Bookmark:
				if o, ok := ev.Object.(client.Object); ok {
					last = o.GetResourceVersion()
				}
				continue
			}
			obj, ok := ev.Object.(client.Object)
			if !ok {
				return last, false, false, fmt.Errorf("watch of %T sent %T", list, ev.Object)
			}
			last = obj.GetResourceVersion()
			if done, err := fn(ev.Type, obj); done || err != nil {
				return last, done, false, err
			}
		}
	}
}

func statusCode(err error) int32 {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s.Status().Code
	}
	return 0
}
