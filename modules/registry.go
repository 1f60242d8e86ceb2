package modules

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Registry is the list of modules the binary knows, in a fixed order.
type Registry struct {
	modules []Module
}

// NewRegistry returns a registry of the given modules. Names must be unique
// and non-empty.
func NewRegistry(mods ...Module) (*Registry, error) {
	seen := map[string]bool{}
	for _, m := range mods {
		name := m.Name()
		if name == "" {
			return nil, errors.New("module with an empty name")
		}
		if seen[name] {
			return nil, fmt.Errorf("module %q registered twice", name)
		}
		seen[name] = true
	}
	return &Registry{modules: slices.Clone(mods)}, nil
}

// All returns every known module in registry order.
func (r *Registry) All() []Module {
	return slices.Clone(r.modules)
}

// Names returns the names of every known module in registry order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.modules))
	for _, m := range r.modules {
		names = append(names, m.Name())
	}
	return names
}

// Resolve turns the values of --enable-modules into modules, in registry
// order (not flag order) so that set-up is deterministic. Surrounding spaces
// are ignored and a name given twice counts once. An unknown name or an empty
// list is an error naming the valid modules.
func (r *Registry) Resolve(names []string) ([]Module, error) {
	want := map[string]bool{}
	var unknown []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(r.Names(), n) {
			unknown = append(unknown, n)
			continue
		}
		want[n] = true
	}
	valid := strings.Join(r.Names(), ", ")
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown module(s) %s in --enable-modules: valid modules are %s", quoteAll(unknown), valid)
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("--enable-modules is empty: enable at least one of %s", valid)
	}
	var enabled []Module
	for _, m := range r.modules {
		if want[m.Name()] {
			enabled = append(enabled, m)
		}
	}
	return enabled, nil
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i := range s {
		q[i] = fmt.Sprintf("%q", s[i])
	}
	return strings.Join(q, ", ")
}
