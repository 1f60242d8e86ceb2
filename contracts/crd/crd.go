// Package crd checks our CustomResourceDefinitions against what Cluster API
// and clusterctl read from them: the CRD name clusterctl computes, the
// contract label Cluster API uses to pick a version, scope, and the status
// subresource. Tests of every module and of the bundles call it.
package crd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/contract"
)

// ContractLabel is the label that maps the Cluster API contract our types
// follow to their served versions, e.g. "v1alpha1" or "v1alpha1_v1alpha2".
var ContractLabel = clusterv1.GroupVersion.String()

type checkOptions struct {
	clusterScoped bool
	template      bool
	category      string
}

// Option changes what Check expects.
type Option func(*checkOptions)

// ClusterScoped expects a cluster-scoped kind (e.g. a global IP pool)
// instead of a namespaced one.
func ClusterScoped() Option { return func(o *checkOptions) { o.clusterScoped = true } }

// Template expects a template kind, which has no status subresource.
func Template() Option { return func(o *checkOptions) { o.template = true } }

// InCategory expects the kind to be in the given category, e.g. cluster-api,
// so that `kubectl get cluster-api` lists it.
func InCategory(c string) Option { return func(o *checkOptions) { o.category = c } }

// Check returns every way the CRD breaks the contract, joined; nil if none.
func Check(crd *apiextensionsv1.CustomResourceDefinition, opts ...Option) error {
	o := checkOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	kind := crd.Spec.Names.Kind
	var errs []error

	if want := contract.CalculateCRDName(crd.Spec.Group, kind); crd.Name != want {
		errs = append(errs, fmt.Errorf("CRD of %s is named %q, clusterctl expects %q", kind, crd.Name, want))
	}

	served := servedVersions(crd)
	if label, ok := crd.Labels[ContractLabel]; !ok {
		errs = append(errs, fmt.Errorf("CRD %s has no %s label mapping the contract to its versions", crd.Name, ContractLabel))
	} else {
		listed := strings.Split(label, "_")
		sort.Strings(listed)
		if !slices.Equal(listed, served) {
			errs = append(errs, fmt.Errorf("CRD %s label %s=%q does not match its served versions %v", crd.Name, ContractLabel, label, served))
		}
	}

	wantScope := apiextensionsv1.NamespaceScoped
	if o.clusterScoped {
		wantScope = apiextensionsv1.ClusterScoped
	}
	if crd.Spec.Scope != wantScope {
		errs = append(errs, fmt.Errorf("CRD %s is %s, expected %s", crd.Name, crd.Spec.Scope, wantScope))
	}

	for _, v := range crd.Spec.Versions {
		if v.Served && !o.template && (v.Subresources == nil || v.Subresources.Status == nil) {
			errs = append(errs, fmt.Errorf("CRD %s version %s has no status subresource", crd.Name, v.Name))
		}
	}

	if o.category != "" && !slices.Contains(crd.Spec.Names.Categories, o.category) {
		errs = append(errs, fmt.Errorf("CRD %s is not in category %q (categories %v)", crd.Name, o.category, crd.Spec.Names.Categories))
	}
	return errors.Join(errs...)
}

func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var served []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			served = append(served, v.Name)
		}
	}
	sort.Strings(served)
	return served
}

// LoadDir reads every CRD in the YAML files of dir (e.g. manifests/ipam/crd).
func LoadDir(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", dir, err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", f, err)
		}
		for _, doc := range strings.Split(string(raw), "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			c := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict([]byte(doc), c); err != nil {
				return nil, fmt.Errorf("failed to decode a CRD in %s: %w", f, err)
			}
			crds = append(crds, c)
		}
	}
	return crds, nil
}

// HasPath reports whether the CRD's schema (of every served version) has
// the property at path, e.g. "status", "initialization", "provisioned".
// Array items are entered transparently.
func HasPath(c *apiextensionsv1.CustomResourceDefinition, path ...string) error {
	for _, v := range c.Spec.Versions {
		if !v.Served {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return fmt.Errorf("CRD %s version %s has no schema", c.Name, v.Name)
		}
		s := v.Schema.OpenAPIV3Schema
		for i, p := range path {
			if s.Items != nil && s.Items.Schema != nil {
				s = s.Items.Schema
			}
			next, ok := s.Properties[p]
			if !ok {
				return fmt.Errorf("CRD %s version %s has no field %s", c.Name, v.Name, strings.Join(path[:i+1], "."))
			}
			s = &next
		}
	}
	return nil
}
