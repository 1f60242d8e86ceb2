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
	// Requires are the modules that must be enabled with this one; they are
	// registered before it, so that they are built and set up before it.
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
// and non-empty, and every required module must be registered, before the
// module that requires it.
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
	registered := map[string]bool{}
	for _, e := range entries {
		for _, req := range e.Requires {
			if !seen[req] {
				return nil, fmt.Errorf("module %q requires %q, which is not registered", e.Name, req)
			}
			if !registered[req] {
				return nil, fmt.Errorf("module %q requires %q, which must be registered before it", e.Name, req)
			}
		}
		registered[e.Name] = true
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
// from the parsed flag values, in registry order: a required module is built
// before the module that requires it.
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

// Check checks a list of modules to set up on one manager: at least one,
// names unique. They are set up in the order given.
func Check(mods []Module) error {
	if len(mods) == 0 {
		return errors.New("no module to run")
	}
	present := map[string]bool{}
	for _, m := range mods {
		if present[m.Name()] {
			return fmt.Errorf("module %q given twice", m.Name())
		}
		present[m.Name()] = true
	}
	return nil
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i := range s {
		q[i] = fmt.Sprintf("%q", s[i])
	}
	return strings.Join(q, ", ")
}
