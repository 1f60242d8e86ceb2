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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
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
		crds, err := decode(data, f)
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

func decode(data []byte, source string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
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
// serves every one of them.
func Install(ctx context.Context, cfg *rest.Config, list []*apiextensionsv1.CustomResourceDefinition) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("failed to install CRDs: %w", err)
	}
	// controller-runtime's envtest installer creates or updates, then polls
	// discovery until every version is served: exactly what is needed here.
	if _, err := crenvtest.InstallCRDs(cfg, crenvtest.CRDInstallOptions{
		CRDs:               list,
		MaxTime:            DefaultInstallTimeout,
		PollInterval:       100 * time.Millisecond,
		ErrorIfPathMissing: false,
	}); err != nil {
		return fmt.Errorf("failed to install %d CRDs: %w", len(list), err)
	}
	return nil
}

// ReadClusterAPI reads Cluster API core's CRDs from dir (the pinned module's
// core/config/crd/bases).
func ReadClusterAPI(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	list, err := ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to read Cluster API's CRDs from %s: %w", filepath.Clean(dir), err)
	}
	return list, nil
}
