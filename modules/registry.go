package modules

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// Entry is one module the binary can run, as its registry knows it: the
// module's name, the modules it needs, and how its typed options are bound to
// command-line flags.
type Entry struct {
	// Name is the module's --enable-modules value.
	Name string
	// Requires are the modules that must be enabled with this one.
	Requires []string
	// BindFlags binds the module's options to fs, starting from their
	// defaults, and returns the constructor that builds the module from
	// the values fs was parsed into.
	BindFlags func(fs *pflag.FlagSet) (build func() Module)
}

// Registry is the list of modules the binary knows, in a fixed order.
type Registry struct {
	entries []Entry
}

// NewRegistry returns a registry of the given entries. Names must be unique
// and non-empty, and every required module must be registered too.
func NewRegistry(entries ...Entry) (*Registry, error) {
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Name == "" {
			return nil, errors.New("module with an empty name")
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("module %q registered twice", e.Name)
		}
		if e.BindFlags == nil {
			return nil, fmt.Errorf("module %q has no BindFlags", e.Name)
		}
		seen[e.Name] = true
	}
	for _, e := range entries {
		for _, req := range e.Requires {
			if !seen[req] {
				return nil, fmt.Errorf("module %q requires %q, which is not registered", e.Name, req)
			}
		}
	}
	return &Registry{entries: slices.Clone(entries)}, nil
}

// Names returns the names of every known module in registry order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.entries))
	for _, e := range r.entries {
		names = append(names, e.Name)
	}
	return names
}

// Resolve turns the values of --enable-modules into entries, in registry
// order (not flag order) so that set-up is deterministic. Surrounding spaces
// are ignored and a name given twice counts once. An unknown name, an empty
// list, or a module enabled without one it requires is an error naming the
// valid or missing modules.
func (r *Registry) Resolve(names []string) ([]Entry, error) {
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
	var enabled []Entry
	var errs []error
	for _, e := range r.entries {
		if !want[e.Name] {
			continue
		}
		for _, req := range e.Requires {
			if !want[req] {
				errs = append(errs, fmt.Errorf("module %q requires module %q: add it to --enable-modules", e.Name, req))
			}
		}
		enabled = append(enabled, e)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return enabled, nil
}

// Bound are the registry's modules with their options bound to one flag set.
type Bound struct {
	reg   *Registry
	build map[string]func() Module
}

// BindFlags binds the options of every known module (enabled or not, so that
// one set of manifests can be reused with a different --enable-modules) to fs.
func (r *Registry) BindFlags(fs *pflag.FlagSet) *Bound {
	b := &Bound{reg: r, build: map[string]func() Module{}}
	for _, e := range r.entries {
		b.build[e.Name] = e.BindFlags(fs)
	}
	return b
}

// Modules resolves names (see Registry.Resolve) and builds those modules
// from the parsed flag values.
func (b *Bound) Modules(names []string) ([]Module, error) {
	entries, err := b.reg.Resolve(names)
	if err != nil {
		return nil, err
	}
	mods := make([]Module, 0, len(entries))
	for _, e := range entries {
		mods = append(mods, b.build[e.Name]())
	}
	return mods, nil
}

// Order checks a list of modules to set up on one manager (names unique,
// every required module present) and returns it ordered so that each module
// comes after those it requires, otherwise keeping the given order.
func Order(mods []Module) ([]Module, error) {
	if len(mods) == 0 {
		return nil, errors.New("no module to run")
	}
	present := map[string]bool{}
	for _, m := range mods {
		if present[m.Name()] {
			return nil, fmt.Errorf("module %q given twice", m.Name())
		}
		present[m.Name()] = true
	}
	var errs []error
	for _, m := range mods {
		for _, req := range requires(m) {
			if !present[req] {
				errs = append(errs, fmt.Errorf("module %q requires module %q, which is not enabled", m.Name(), req))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ordered := make([]Module, 0, len(mods))
	done := map[string]bool{}
	for len(ordered) < len(mods) {
		progress := false
		for _, m := range mods {
			if done[m.Name()] || !allDone(requires(m), done) {
				continue
			}
			ordered = append(ordered, m)
			done[m.Name()] = true
			progress = true
		}
		if !progress {
			return nil, errors.New("modules require each other in a cycle")
		}
	}
	return ordered, nil
}

func requires(m Module) []string {
	if r, ok := m.(Requirer); ok {
		return r.Requires()
	}
	return nil
}

func allDone(names []string, done map[string]bool) bool {
	for _, n := range names {
		if !done[n] {
			return false
		}
	}
	return true
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i := range s {
		q[i] = fmt.Sprintf("%q", s[i])
	}
	return strings.Join(q, ", ")
}
