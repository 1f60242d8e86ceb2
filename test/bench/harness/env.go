package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// ModulePath is the Go module whose root RepoRoot looks for.
const ModulePath = "github.com/capi-monolith/capi-monolith"

// EnvOptions configure StartEnvironment.
type EnvOptions struct {
	// AddToScheme add the benchmark's own types to envtest.NewScheme().
	AddToScheme []func(*runtime.Scheme) error
	// CRDDirs are folders of CRDs installed beside Cluster API's, relative
	// to the repository root (e.g. "manifests/ipam/crd").
	CRDDirs []string
}

// StartEnvironment starts one envtest apiserver for a benchmark. It works
// from any folder inside the repository: `go run` starts in the root, `go
// test` in the package folder.
func StartEnvironment(ctx context.Context, opts EnvOptions) (*envtest.Environment, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	scheme, err := envtest.NewScheme()
	if err != nil {
		return nil, err
	}
	for _, add := range opts.AddToScheme {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("failed to add the benchmark's types to the scheme: %w", err)
		}
	}
	dirs := make([]string, 0, len(opts.CRDDirs))
	for _, d := range opts.CRDDirs {
		dirs = append(dirs, filepath.Join(root, d))
	}
	return envtest.Start(ctx, envtest.Options{Scheme: scheme, CRDDirectoryPaths: dirs})
}

// RepoRoot returns the folder of the go.mod declaring ModulePath, found by
// walking up from the working folder.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("failed to find the repository root: %w", err)
	}
	for {
		ok, err := declaresModule(filepath.Join(dir, "go.mod"))
		if err != nil {
			return "", err
		}
		if ok {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("failed to find the go.mod of %s above the working folder: run inside the repository", ModulePath)
		}
		dir = parent
	}
}

func declaresModule(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == ModulePath, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("failed to read %s: %w", path, err)
	}
	return false, nil
}
