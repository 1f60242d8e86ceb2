package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// openAPISet is the resource set of the request's cluster, or the
// built-ins' when the request names none (the OpenAPI documents of the
// built-ins do not depend on the cluster).
func (h *Handler) openAPISet(r *http.Request) *resourceSet {
	st, err := h.opts.StoreFor(r)
	if err != nil {
		return builtinSet
	}
	set, err := h.crds.set(st)
	if err != nil {
		return builtinSet
	}
	return set
}

// withCustomOpenAPIV3 adds to the built-in v3 documents those of the
// cluster's CRD group versions, built by apiextensions-apiserver's own
// builder (what kube-apiserver publishes for them, so kubectl explain and
// kubectl's validation read them), once per resource set.
func (h *Handler) withCustomOpenAPIV3(r *http.Request, docs *openAPIV3Docs) (*openAPIV3Docs, error) {
	set := h.openAPISet(r)
	if len(set.customGVs) == 0 {
		return docs, nil
	}
	set.openAPIMu.Lock()
	defer set.openAPIMu.Unlock()
	if set.openAPIV3 != nil && set.openAPIV3Base == docs {
		return set.openAPIV3, nil
	}
	out := &openAPIV3Docs{byPath: map[string]*openAPIDoc{}}
	for p, d := range docs.byPath {
		out.byPath[p] = d
	}
	var index openAPIV3Index
	if err := json.Unmarshal(docs.index.json, &index); err != nil {
		return nil, fmt.Errorf("failed to decode the OpenAPI v3 index: %w", err)
	}
	for _, gv := range set.customGVs {
		var specs []*spec3.OpenAPI
		for _, crd := range set.crds {
			if crd.Spec.Group != gv.Group || !servesVersion(crd, gv.Version) {
				continue
			}
			spec, err := builder.BuildOpenAPIV3(crd, gv.Version, builder.Options{V2: false})
			if err != nil {
				return nil, fmt.Errorf("failed to build the OpenAPI v3 document of %s %s: %w", crd.Name, gv.Version, err)
			}
			specs = append(specs, spec)
		}
		merged, err := builder.MergeSpecsV3(specs...)
		if err != nil {
			return nil, fmt.Errorf("failed to merge the OpenAPI v3 documents of %s: %w", gv, err)
		}
		body, err := json.Marshal(merged)
		if err != nil {
			return nil, fmt.Errorf("failed to encode the OpenAPI v3 document of %s: %w", gv, err)
		}
		gvPath := openAPIGroupVersionPath(gv)
		doc := newOpenAPIDoc(body, v3Proto)
		out.byPath[gvPath] = doc
		index.Paths[gvPath] = openAPIV3IndexEntry{ServerRelativeURL: openAPIV3URL(gvPath, doc.etag)}
	}
	body, err := json.Marshal(index)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the OpenAPI v3 index: %w", err)
	}
	out.index = newOpenAPIDoc(body, nil)
	set.openAPIV3, set.openAPIV3Base = out, docs
	return out, nil
}

// withCustomOpenAPIV2 is the v2 document with the definitions and paths
// of the cluster's CRDs merged in, as kube-apiserver merges them (the
// built-ins win a clash), once per resource set.
func (h *Handler) withCustomOpenAPIV2(r *http.Request, doc *openAPIDoc) (*openAPIDoc, error) {
	set := h.openAPISet(r)
	if len(set.crds) == 0 {
		return doc, nil
	}
	set.openAPIMu.Lock()
	defer set.openAPIMu.Unlock()
	if set.openAPIV2 != nil && set.openAPIV2Base == doc {
		return set.openAPIV2, nil
	}
	merged := &spec.Swagger{}
	if err := json.Unmarshal(doc.json, merged); err != nil {
		return nil, fmt.Errorf("failed to decode the OpenAPI v2 document: %w", err)
	}
	for _, crd := range set.crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			s, err := builder.BuildOpenAPIV2(crd, v.Name, builder.Options{V2: true})
			if err != nil {
				return nil, fmt.Errorf("failed to build the OpenAPI v2 document of %s %s: %w", crd.Name, v.Name, err)
			}
			// The built-ins' defaults are pruned; the CRD's must be for
			// the shared definitions to merge.
			s.Definitions = handler.PruneDefaults(s.Definitions)
			if merged, err = builder.MergeSpecs(merged, s); err != nil {
				return nil, fmt.Errorf("failed to merge the OpenAPI v2 document of %s %s: %w", crd.Name, v.Name, err)
			}
		}
	}
	body, err := json.Marshal(merged)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the OpenAPI v2 document: %w", err)
	}
	set.openAPIV2, set.openAPIV2Base = newOpenAPIDoc(body, v2Proto), doc
	return set.openAPIV2, nil
}

func servesVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Served {
			return true
		}
	}
	return false
}
