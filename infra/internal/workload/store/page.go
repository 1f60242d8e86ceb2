package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Page is one page of a paginated list.
type Page struct {
	Items           []*unstructured.Unstructured
	ResourceVersion string
	// Continue fetches the next page; empty on the last.
	Continue           string
	RemainingItemCount *int64
}

// continueToken is what Continue encodes: the list's resourceVersion and
// the last key served.
type continueToken struct {
	RV        uint64 `json:"rv"`
	Namespace string `json:"ns"`
	Name      string `json:"name"`
}

// errContinueExpired is kube-apiserver's answer to a continue token it can
// no longer serve consistently; client-go's pager then lists whole.
func errContinueExpired() error {
	return apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
}

// ListPage lists as List does, at most limit items (0: all) after the
// continue token (empty: from the start). Every page shows the state of
// the first page's resourceVersion: a continue token is served only while
// no object of the resource has changed since, and is 410 Gone (Expired)
// otherwise, as kube-apiserver answers a token it cannot serve
// consistently.
func (s *Store) ListPage(res Resource, namespace string, opts ListOptions, limit int64, cont string) (*Page, error) {
	if err := validateFieldSelector(res, opts.FieldSelector); err != nil {
		return nil, err
	}
	var tok *continueToken
	if cont != "" {
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		raw, err := base64.RawURLEncoding.DecodeString(cont)
		tok = &continueToken{}
		if err == nil {
			err = json.Unmarshal(raw, tok)
		}
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("continue key is not valid: %v", err))
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if tok != nil && s.changedSince(res, tok.RV) {
		return nil, errContinueExpired()
	}
	if err := s.checkListRV(opts); err != nil {
		return nil, err
	}
	keys := s.matchingLocked(res, namespace, opts)
	rv := strconv.FormatUint(s.rv, 10)
	if tok != nil {
		rv = strconv.FormatUint(tok.RV, 10)
		start := 0
		for start < len(keys) && !after(keys[start], tok) {
			start++
		}
		keys = keys[start:]
	}
	page := &Page{ResourceVersion: rv}
	if limit > 0 && int64(len(keys)) > limit {
		last := keys[limit-1]
		listRV, _ := strconv.ParseUint(rv, 10, 64)
		raw, err := json.Marshal(continueToken{RV: listRV, Namespace: last.namespace, Name: last.name})
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("failed to encode the continue token: %w", err))
		}
		remaining := int64(len(keys)) - limit
		keys = keys[:limit]
		page.Continue = base64.RawURLEncoding.EncodeToString(raw)
		page.RemainingItemCount = &remaining
	}
	if len(keys) > 0 {
		page.Items = make([]*unstructured.Unstructured, len(keys))
		for i, k := range keys {
			page.Items[i] = s.objects[k].decode()
		}
	}
	return page, nil
}

// after says the key sorts after the token's last key.
func after(k key, tok *continueToken) bool {
	if k.namespace != tok.Namespace {
		return k.namespace > tok.Namespace
	}
	return k.name > tok.Name
}

// changedSince says whether an object of the resource changed after rv, or
// the history no longer tells.
func (s *Store) changedSince(res Resource, rv uint64) bool {
	if rv < s.floor || rv > s.rv {
		return true
	}
	for _, e := range s.history {
		if e.rv > rv && e.res.Group == res.Group && e.res.Resource == res.Resource {
			return true
		}
	}
	return false
}
