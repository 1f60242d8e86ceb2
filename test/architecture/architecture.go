// Package architecture holds the rule of the house on imports, as code:
// which package of which module (or shared area) may import which package of
// another area, and, inside a module, which floor may import which (api
// below internal packages, reconcilers above the backends they drive, never
// the other way). Check applies the rules to an import graph; Load builds
// the graph of the project's non-test code with `go list`. The test beside
// it fails on any arrow the rules do not allow.
//
// The compiler already keeps everyone out of a module's internal/ packages;
// these rules close what it cannot: a module's exported non-api packages
// (its root, the infra machine seam), the api packages, the arrows between
// shared areas and the direction of the arrows inside a module, so that
// only the arrows named here exist.
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
	// Closed are the shared areas (contracts, modules, manager, ...): they
	// and the modules import no package of another module or shared area
	// unless an Edge says so.
	Closed []string
	// Allowed are the arrows between areas; any other is a violation. An
	// edge whose From is EveryModule holds for each module.
	Allowed []Edge
	// Layers are the floors inside every module, lowest first: a package
	// of a module may import its own module's packages on its floor or
	// below, never above.
	Layers []Layer
}

// EveryModule as an Edge's From stands for each of Rules.Modules.
const EveryModule = "*"

// Layer is one floor inside a module.
type Layer struct {
	// Name names the floor in the rules.
	Name string
	// Packages are the floor's packages, as paths inside the module: a
	// path, or a path ending in "/..." for every package under it; "." is
	// the module's root package. A package on no floor is on the top one.
	// Where floors overlap ("internal/..." and "internal/reconcilers/..."),
	// the higher floor wins.
	Packages []string
	// Why says what sits on the floor.
	Why string
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

// Check returns every import of g that the rules do not allow, sorted: an
// import from a module or a closed area into another module or closed area
// without an allowed edge, and an import inside a module from a floor to a
// higher one. Imports from areas that are neither modules nor closed (the
// main package, test/), and into packages outside every module and closed
// area, are not restricted here.
func Check(g Graph, r Rules) []Violation {
	var out []Violation
	for from, imports := range g {
		fa := area(from)
		module := slices.Contains(r.Modules, fa)
		if !module && !slices.Contains(r.Closed, fa) {
			continue
		}
		for _, to := range imports {
			ta := area(to)
			if ta == fa {
				if module && floor(r.Layers, fa, to) > floor(r.Layers, fa, from) {
					out = append(out, Violation{From: from, To: to})
				}
				continue
			}
			if !slices.Contains(r.Modules, ta) && !slices.Contains(r.Closed, ta) {
				continue
			}
			if !allowed(r.edges(), fa, to) {
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

// edges are the allowed edges with EveryModule spelled out.
func (r Rules) edges() []Edge {
	var out []Edge
	for _, e := range r.Allowed {
		if e.From != EveryModule {
			out = append(out, e)
			continue
		}
		for _, m := range r.Modules {
			out = append(out, Edge{From: m, To: e.To, Why: e.Why})
		}
	}
	return out
}

func allowed(edges []Edge, fromArea, to string) bool {
	for _, e := range edges {
		if e.From == fromArea && matches(e.To, to) {
			return true
		}
	}
	return false
}

// matches says whether pkg is pattern, or under it when pattern ends in
// "/...".
func matches(pattern, pkg string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
	}
	return pkg == pattern
}

// floor is the index of the highest layer that holds pkg of module; a
// package on no layer is above them all.
func floor(layers []Layer, module, pkg string) int {
	inside := "."
	if pkg != module {
		inside = strings.TrimPrefix(pkg, module+"/")
	}
	for i := len(layers) - 1; i >= 0; i-- {
		for _, p := range layers[i].Packages {
			if matches(p, inside) {
				return i
			}
		}
	}
	return len(layers)
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
