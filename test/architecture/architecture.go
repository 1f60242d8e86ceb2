// Package architecture holds the rule of the house on imports between the
// modules, as code: which package of which module (or shared area) may
// import which package of another. Check applies the rules to an import
// graph; Load builds the graph of the project's non-test code with
// `go list`. The test beside it fails on any arrow the rules do not allow.
//
// The compiler already keeps everyone out of a module's internal/ packages;
// these rules close what it cannot: a module's exported non-api packages
// (its root, the infra machine seam) and the api packages, so that only the
// arrows named here exist.
package architecture

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
)

// ModulePath is the Go module of the project.
const ModulePath = "github.com/capi-monolith/capi-monolith"

// Graph maps a package (its path inside the Go module) to the packages of
// the Go module it imports (same form). Imports outside the Go module are
// left out: the rules are about our own packages.
type Graph map[string][]string

// Edge is one allowed arrow: packages of area From may import the package
// To of another area, or any package under To when To ends in "/...".
type Edge struct {
	From, To string
	// Why says what the arrow is for; the rules are documentation too.
	Why string
}

// Rules say which areas there are and which arrows between them exist.
type Rules struct {
	// Modules are the top-level folders that are modules.
	Modules []string
	// Closed are the shared areas that may import no module package at all
	// unless an Edge says so (contracts, modules, manager, ...).
	Closed []string
	// Allowed are the arrows between areas; any other is a violation.
	Allowed []Edge
}

// Violation is an import the rules do not allow.
type Violation struct {
	From, To string
}

func (v Violation) String() string { return v.From + " imports " + v.To }

// area is the top-level folder of a package ("" for the main package).
func area(pkg string) string {
	top, _, _ := strings.Cut(pkg, "/")
	return top
}

// Check returns every import of g that crosses from one area into a module
// (or from a closed area into anything) without an allowed edge, sorted.
// Imports within an area, and imports from areas that are neither modules
// nor closed (the main package, test/), are not restricted here.
func Check(g Graph, r Rules) []Violation {
	var out []Violation
	for from, imports := range g {
		fa := area(from)
		restricted := slices.Contains(r.Modules, fa) || slices.Contains(r.Closed, fa)
		if !restricted {
			continue
		}
		for _, to := range imports {
			ta := area(to)
			if ta == fa || !slices.Contains(r.Modules, ta) {
				// Within an area, or into a shared area (contracts/, ...).
				continue
			}
			if !allowed(r.Allowed, fa, to) {
				out = append(out, Violation{From: from, To: to})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	return out
}

func allowed(edges []Edge, fromArea, to string) bool {
	for _, e := range edges {
		if e.From != fromArea {
			continue
		}
		if prefix, ok := strings.CutSuffix(e.To, "/..."); ok {
			if to == prefix || strings.HasPrefix(to, prefix+"/") {
				return true
			}
			continue
		}
		if to == e.To {
			return true
		}
	}
	return false
}

// Load returns the import graph of the non-test packages under dir (the
// Go module's root), from `go list`.
func Load(dir string) (Graph, error) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list failed: %w: %s", err, stderr.String())
	}
	g := Graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		from, ok := local(fields[0])
		if !ok {
			continue
		}
		g[from] = nil
		for _, imp := range fields[1:] {
			if to, ok := local(imp); ok {
				g[from] = append(g[from], to)
			}
		}
	}
	return g, sc.Err()
}

// local turns an import path of the Go module into its path inside it; the
// main package is "main".
func local(path string) (string, bool) {
	if path == ModulePath {
		return "main", true
	}
	rest, ok := strings.CutPrefix(path, ModulePath+"/")
	return rest, ok
}
