// Package crds reads the CustomResourceDefinitions the dev environment
// installs (Cluster API core's, from the pinned module on disk, and the
// modules' own, embedded in the binary) and installs them.
package crds

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// DefaultInstallTimeout bounds Install's wait for the CRDs to be served.
const DefaultInstallTimeout = time.Minute

// Names returns the names of the CRDs in the YAML files of dir.
func Names(dir string) ([]string, error) {
	list, err := ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list))
	for _, crd := range list {
		names = append(names, crd.Name)
	}
	return names, nil
}

// ReadDir reads every CRD in the *.yaml files of dir (not recursive).
func ReadDir(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return ReadFS(os.DirFS(dir), ".")
}

// ReadFS reads every CRD in the *.yaml files of the folder dir of fsys, in
// file name order. A folder holding no CRD is an error: it is always a
// wrong path.
func ReadFS(fsys fs.FS, dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(fsys, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("failed to list the CRD files of %s: %w", dir, err)
	}
	sort.Strings(files)
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("failed to read CRD file %s: %w", f, err)
		}
		crds, err := Decode(data, f)
		if err != nil {
			return nil, err
		}
		out = append(out, crds...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("failed to read CRDs: none in %s", dir)
	}
	return out, nil
}

// Decode reads every CRD of a multi-document YAML; source names it in errors.
func Decode(data []byte, source string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("failed to split %s: %w", source, err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", source, err)
		}
		if meta.Kind == "" {
			continue
		}
		if meta.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("failed to read %s: unexpected kind %q", source, meta.Kind)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			return nil, fmt.Errorf("failed to decode a CRD of %s: %w", source, err)
		}
		out = append(out, crd)
	}
}

// Install creates the CRDs, or updates the ones that exist (an earlier run
// on the same data, or an existing cluster), and waits until the apiserver
// serves every version of every one of them.
func Install(ctx context.Context, cfg *rest.Config, list []*apiextensionsv1.CustomResourceDefinition) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("failed to install CRDs: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("failed to build the CRD scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("failed to create a client: %w", err)
	}
	for _, want := range list {
		if err := apply(ctx, c, want.DeepCopy()); err != nil {
			return err
		}
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create a discovery client: %w", err)
	}
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, DefaultInstallTimeout, true, func(ctx context.Context) (bool, error) {
		lastErr = served(disc, list)
		return lastErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("failed to wait for %d CRDs to be served: %w (last check: %w)", len(list), err, lastErr)
	}
	return nil
}

// apply creates crd, or replaces the spec of the one that exists.
func apply(ctx context.Context, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) error {
	existing := &apiextensionsv1.CustomResourceDefinition{}
	err := c.Get(ctx, client.ObjectKeyFromObject(crd), existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, crd); err != nil {
			return fmt.Errorf("failed to create CRD %s: %w", crd.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to get CRD %s: %w", crd.Name, err)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), existing); err != nil {
			return err
		}
		// A conversion webhook in place (Cluster API installed for real, or
		// dev's own) is not the manifests' to take away: keep it.
		conv := existing.Spec.Conversion
		existing.Spec = crd.Spec
		if conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter &&
			(crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy == apiextensionsv1.NoneConverter) {
			existing.Spec.Conversion = conv
		}
		for k, v := range crd.Labels {
			if existing.Labels == nil {
				existing.Labels = map[string]string{}
			}
			existing.Labels[k] = v
		}
		if err := c.Update(ctx, existing); err != nil {
			return fmt.Errorf("failed to update CRD %s: %w", crd.Name, err)
		}
		return nil
	})
}

// served checks that discovery lists every served version of every CRD.
func served(disc discovery.DiscoveryInterface, list []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range list {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := crd.Spec.Group + "/" + v.Name
			resources, err := disc.ServerResourcesForGroupVersion(gv)
			if err != nil {
				return fmt.Errorf("failed to discover %s: %w", gv, err)
			}
			found := false
			for _, r := range resources.APIResources {
				if r.Name == crd.Spec.Names.Plural {
					found = true
					break
				}
			}
			if !found {
				return fmt.Errorf("%s is not served in %s yet", crd.Spec.Names.Plural, gv)
			}
		}
	}
	return nil
}

// ReadClusterAPI reads the CRDs of one of Cluster API's components from dir
// (the pinned module's <component>/config/crd/bases) with the labels its
// config/crd/kustomization.yaml gives them, as a release's kustomize build
// does: the kubeadm providers' CRDs carry their contract there
// (cluster.x-k8s.io/v1beta2: v1beta2), which core reads to use their
// objects.
func ReadClusterAPI(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	list, err := ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to read Cluster API's CRDs from %s: %w", filepath.Clean(dir), err)
	}
	labels, err := kustomizationLabels(filepath.Join(dir, "..", "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	for _, crd := range list {
		for k, v := range labels {
			if crd.Labels == nil {
				crd.Labels = map[string]string{}
			}
			crd.Labels[k] = v
		}
	}
	return list, nil
}

// kustomizationLabels returns the labels a kustomization.yaml adds to its
// resources (its labels' pairs); none when the file is missing.
func kustomizationLabels(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", file, err)
	}
	var k struct {
		Labels []struct {
			Pairs map[string]string `json:"pairs"`
		} `json:"labels"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("failed to decode %s: %w", file, err)
	}
	out := map[string]string{}
	for _, l := range k.Labels {
		for key, v := range l.Pairs {
			out[key] = v
		}
	}
	return out, nil
}
