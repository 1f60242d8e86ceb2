// Package toolcache finds the binaries the project builds from the Go module
// proxy into its cache outside the work tree (`make tools`): one folder per
// tool and version, <cache>/<folder>/<version>/<file>, the layout the
// Makefile and hack/ scripts write.
package toolcache

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dir returns the folder where the project caches the binaries it builds:
// $CAPI_MONOLITH_CACHE, else $XDG_CACHE_HOME/capi-monolith, else
// $HOME/.cache/capi-monolith (the same rule as the Makefile and hack/ scripts).
func Dir() (string, error) {
	if dir := os.Getenv("CAPI_MONOLITH_CACHE"); dir != "" {
		return dir, nil
	}
	if dir := os.Getenv("XDG_CACHE_HOME"); dir != "" {
		return filepath.Join(dir, "capi-monolith"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("failed to find the cache folder (set CAPI_MONOLITH_CACHE): %w", err)
	}
	return filepath.Join(home, ".cache", "capi-monolith"), nil
}

// Binary is one binary of the cache.
type Binary struct {
	// Title names it in messages, e.g. "Cluster API core manager".
	Title string
	// Folder and File place it: <cache>/<Folder>/<version>/<File>.
	Folder, File string
	// EnvVar, when set in the environment, names the binary to use instead
	// (the Makefile exports it).
	EnvVar string
	// MakeTarget builds it.
	MakeTarget string
}

// Clusterctl is Cluster API's CLI, built from the pinned module (`go install
// ...@version` fails on its replace directives).
var Clusterctl = Binary{Title: "clusterctl", Folder: "clusterctl", File: "clusterctl", EnvVar: "CLUSTERCTL", MakeTarget: "clusterctl"}

// Path is where the cache cacheDir holds version of b.
func (b Binary) Path(cacheDir, version string) string {
	return filepath.Join(cacheDir, b.Folder, version, b.File)
}

// Find returns the binary to run: given, else $EnvVar, else the one the
// cache cacheDir (default: Dir) holds for version. It fails, naming the make
// target, when the file is missing or not executable.
func (b Binary) Find(given, cacheDir, version string) (string, error) {
	path, source := given, "given"
	if path == "" && b.EnvVar != "" {
		path, source = os.Getenv(b.EnvVar), b.EnvVar
	}
	if path == "" {
		if cacheDir == "" {
			dir, err := Dir()
			if err != nil {
				return "", err
			}
			cacheDir = dir
		}
		path, source = b.Path(cacheDir, version), "the default cache path"
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("failed to find %s at %s (%s): run `make %s` or set %s: %w", b.Title, path, source, b.MakeTarget, b.EnvVar, err)
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		return "", fmt.Errorf("failed to use %s at %s (%s): not an executable file; run `make %s`", b.Title, path, source, b.MakeTarget)
	}
	return path, nil
}
