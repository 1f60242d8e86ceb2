package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// gvkExtension lists the kinds a schema is the schema of.
const gvkExtension = "x-kubernetes-group-version-kind"

// openAPIGroupVersionPath is a group version as OpenAPI v3 keys it:
// api/v1, apis/apps/v1.
func openAPIGroupVersionPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// servedOpenAPIPaths are the served paths as kube-apiserver's OpenAPI
// names them, each with the v3 document that holds it ("" for the
// discovery roots, which only the v2 document holds): every resource's
// collection and object paths and every subresource discovery lists
// (proxies with and without a path after them). Paths kube-apiserver's
// document does not have (the object path of a create-only resource) match
// nothing; the legacy /watch/ paths are left out.
var servedOpenAPIPaths = func() map[string]string {
	paths := map[string]string{"/api/": "", "/apis/": "", "/version/": ""}
	var builtins []*resource
	for _, gv := range builtinSet.groupVersions() {
		paths["/"+openAPIGroupVersionPath(gv)+"/"] = openAPIGroupVersionPath(gv)
		if gv.Group != "" {
			paths["/apis/"+gv.Group+"/"] = ""
		}
		builtins = append(builtins, builtinSet.resourcesOf(gv)...)
	}
	for _, r := range builtins {
		doc := openAPIGroupVersionPath(r.gv)
		prefix := "/" + doc
		collection := prefix + "/" + r.name
		paths[collection] = doc
		if r.namespaced {
			collection = prefix + "/namespaces/{namespace}/" + r.name
			paths[collection] = doc
		}
		item := collection + "/{name}"
		paths[item] = doc
		for _, s := range r.subresourceList() {
			paths[item+"/"+s.name] = doc
			if s.name == "proxy" {
				paths[item+"/proxy/{path}"] = doc
			}
		}
	}
	return paths
}()

// filterOpenAPI keeps of an OpenAPI document (v2 or v3, JSON) the paths
// keep accepts and what they reference, transitively: the definitions (v2)
// or components (v3) nothing kept references are dropped, so the document
// describes only what is served. The kinds a schema names in
// x-kubernetes-group-version-kind are narrowed to served group versions.
func filterOpenAPI(doc []byte, keep func(path string) bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	// Numbers stay as written (defaults, bounds), not float64.
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("failed to decode the OpenAPI document: %w", err)
	}
	paths, ok := root["paths"].(map[string]any)
	if !ok {
		return nil, errors.New("the OpenAPI document has no paths")
	}
	kept := map[string]any{}
	for p, item := range paths {
		if keep(p) {
			kept[p] = item
		}
	}
	root["paths"] = kept

	reached := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && !reached[ref] {
				reached[ref] = true
				if target := resolveRef(root, ref); target != nil {
					walk(target)
				}
			}
			for _, child := range v {
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(kept)

	// v2 keeps referenced schemas, parameters and responses at the top;
	// v3 under components (security schemes are named, not referenced).
	for _, section := range []string{"definitions", "parameters", "responses"} {
		pruneSection(root, []string{section}, reached)
	}
	if components, ok := root["components"].(map[string]any); ok {
		for kind := range components {
			if kind != "securitySchemes" {
				pruneSection(root, []string{"components", kind}, reached)
			}
		}
	}
	narrowKinds(root)

	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("failed to encode the OpenAPI document: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// pruneSection drops the entries of the map at path whose reference
// (#/path/name) was not reached.
func pruneSection(root map[string]any, path []string, reached map[string]bool) {
	section, ok := lookupPointer(root, path).(map[string]any)
	if !ok {
		return
	}
	prefix := "#/" + strings.Join(path, "/") + "/"
	for name := range section {
		if !reached[prefix+escapePointerToken(name)] {
			delete(section, name)
		}
	}
}

// narrowKinds keeps, in every x-kubernetes-group-version-kind list, the
// kinds of served group versions (shared types such as DeleteOptions list
// every group kube-apiserver serves).
func narrowKinds(root map[string]any) {
	for _, path := range [][]string{{"definitions"}, {"components", "schemas"}} {
		schemas, ok := lookupPointer(root, path).(map[string]any)
		if !ok {
			continue
		}
		for _, s := range schemas {
			s, ok := s.(map[string]any)
			if !ok {
				continue
			}
			kinds, ok := s[gvkExtension].([]any)
			if !ok {
				continue
			}
			var served []any
			for _, k := range kinds {
				k, ok := k.(map[string]any)
				if !ok {
					continue
				}
				group, _ := k["group"].(string)
				version, _ := k["version"].(string)
				if servesGroupVersion(schema.GroupVersion{Group: group, Version: version}) {
					served = append(served, k)
				}
			}
			if len(served) == 0 {
				delete(s, gvkExtension)
				continue
			}
			s[gvkExtension] = served
		}
	}
}

// resolveRef returns what a local reference (#/a/b) points at, or nil.
func resolveRef(root map[string]any, ref string) any {
	pointer, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	tokens := strings.Split(pointer, "/")
	for i, t := range tokens {
		tokens[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	return lookupPointer(root, tokens)
}

func lookupPointer(root map[string]any, tokens []string) any {
	var v any = root
	for _, t := range tokens {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[t]
	}
	return v
}

func escapePointerToken(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}
