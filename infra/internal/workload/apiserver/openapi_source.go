package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// OpenAPISource is where the OpenAPI documents of the workload API come
// from: something that describes the same built-in kinds, such as a
// kube-apiserver. The Handler keeps what it serves of them (filtered to the
// served paths and the schemas they reference) for the life of the
// process, so a source is asked at most once per document after its first
// success.
type OpenAPISource interface {
	// OpenAPIV2 returns the OpenAPI v2 (swagger) document, JSON.
	OpenAPIV2(ctx context.Context) ([]byte, error)
	// OpenAPIV3 returns the OpenAPI v3 documents (JSON) of the group
	// versions asked for, keyed as asked ("api/v1", "apis/apps/v1"); a
	// group version the source does not describe is missing from the map.
	OpenAPIV3(ctx context.Context, groupVersions []string) (map[string][]byte, error)
}

// KubeAPIServerOpenAPI is an OpenAPISource reading a kube-apiserver's
// /openapi/v2 and /openapi/v3 with client-go's discovery REST client. Any
// authenticated user may read them (kube-apiserver's system:discovery
// role), so no RBAC rule is needed for it.
type KubeAPIServerOpenAPI struct {
	client rest.Interface
}

var _ OpenAPISource = &KubeAPIServerOpenAPI{}

// NewKubeAPIServerOpenAPI returns a source reading the kube-apiserver cfg
// points at; it sends no request until asked for a document.
func NewKubeAPIServerOpenAPI(cfg *rest.Config) (*KubeAPIServerOpenAPI, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to make the discovery client of the OpenAPI source: %w", err)
	}
	return &KubeAPIServerOpenAPI{client: dc.RESTClient()}, nil
}

// OpenAPIV2 implements OpenAPISource.
func (k *KubeAPIServerOpenAPI) OpenAPIV2(ctx context.Context) ([]byte, error) {
	body, err := k.client.Get().AbsPath("/openapi/v2").SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return nil, fmt.Errorf("failed to read /openapi/v2: %w", err)
	}
	return body, nil
}

// OpenAPIV3 implements OpenAPISource: the index, then the document of each
// group version asked for at the URL the index gives (with its hash).
func (k *KubeAPIServerOpenAPI) OpenAPIV3(ctx context.Context, groupVersions []string) (map[string][]byte, error) {
	body, err := k.client.Get().AbsPath("/openapi/v3").SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return nil, fmt.Errorf("failed to read /openapi/v3: %w", err)
	}
	var index openAPIV3Index
	if err := json.Unmarshal(body, &index); err != nil {
		return nil, fmt.Errorf("failed to decode /openapi/v3: %w", err)
	}
	docs := map[string][]byte{}
	for _, gv := range groupVersions {
		entry, ok := index.Paths[gv]
		if !ok {
			continue
		}
		u, err := url.Parse(entry.ServerRelativeURL)
		if err != nil {
			return nil, fmt.Errorf("failed to parse the URL of %s in /openapi/v3: %w", gv, err)
		}
		req := k.client.Get().AbsPath(u.Path).SetHeader("Accept", "application/json")
		for key, values := range u.Query() {
			req = req.Param(key, values[0])
		}
		doc, err := req.Do(ctx).Raw()
		if err != nil {
			return nil, fmt.Errorf("failed to read the OpenAPI v3 document of %s: %w", gv, err)
		}
		docs[gv] = doc
	}
	return docs, nil
}

// openAPIV3Index is the document of /openapi/v3.
type openAPIV3Index struct {
	Paths map[string]openAPIV3IndexEntry `json:"paths"`
}

type openAPIV3IndexEntry struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}
