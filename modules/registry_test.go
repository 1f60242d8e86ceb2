package modules_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/capi-monolith/capi-monolith/modules"
)

type named string

func (n named) Name() string                    { return string(n) }
func (named) AddToScheme(*runtime.Scheme) error { return nil }
func (named) SetupWithManager(context.Context, modules.Shared) error {
	return nil
}

func entry(name string, requires ...string) modules.Entry {
	return modules.Entry{Name: name, Requires: requires, BindFlags: func(*pflag.FlagSet) func() modules.Module {
		return func() modules.Module { return named(name) }
	}}
}

func entryNames(entries []modules.Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}

func names(mods []modules.Module) []string {
	var out []string
	for _, m := range mods {
		out = append(out, m.Name())
	}
	return out
}

func TestResolve(t *testing.T) {
	reg, err := modules.NewRegistry(entry("infra"), entry("machinepool", "infra"), entry("ipam"), entry("runtimeext"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{name: "every module resolves in registry order", in: []string{"runtimeext", "ipam", "machinepool", "infra"}, want: []string{"infra", "machinepool", "ipam", "runtimeext"}},
		{name: "a subset resolves to just those modules", in: []string{"ipam"}, want: []string{"ipam"}},
		{name: "spaces and repeats are ignored", in: []string{" ipam", "ipam ", "infra"}, want: []string{"infra", "ipam"}},
		{name: "an unknown name is an error naming the valid modules", in: []string{"infra", "dns"}, wantErr: `unknown module(s) "dns" in --enable-modules: valid modules are infra, machinepool, ipam, runtimeext`},
		{name: "every unknown name is reported", in: []string{"a", "b"}, wantErr: `"a", "b"`},
		{name: "an empty list is an error", in: []string{}, wantErr: "--enable-modules is empty: enable at least one of infra, machinepool, ipam, runtimeext"},
		{name: "a list of blanks is an error", in: []string{" ", ""}, wantErr: "--enable-modules is empty"},
		{name: "a module without one it requires is an error naming it", in: []string{"machinepool", "ipam"}, wantErr: `module "machinepool" requires module "infra": add it to --enable-modules`},
		{name: "a module with what it requires resolves", in: []string{"machinepool", "infra"}, want: []string{"infra", "machinepool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := reg.Resolve(tt.in)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(entryNames(got)).To(Equal(tt.want))
		})
	}
}

func TestNewRegistry(t *testing.T) {
	t.Run("a name registered twice is refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := modules.NewRegistry(entry("ipam"), entry("ipam"))
		g.Expect(err).To(MatchError(ContainSubstring(`module "ipam" registered twice`)))
	})
	t.Run("an empty name is refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := modules.NewRegistry(entry(""))
		g.Expect(err).To(HaveOccurred())
	})
	t.Run("names keep registry order", func(t *testing.T) {
		g := NewWithT(t)
		reg, err := modules.NewRegistry(entry("b"), entry("a"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reg.Names()).To(Equal([]string{"b", "a"}))
	})
	t.Run("an unregistered requirement is refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := modules.NewRegistry(entry("machinepool", "infra"))
		g.Expect(err).To(MatchError(ContainSubstring(`module "machinepool" requires "infra", which is not registered`)))
	})
	t.Run("a requirement registered after the module that requires it is refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := modules.NewRegistry(entry("machinepool", "infra"), entry("infra"))
		g.Expect(err).To(MatchError(ContainSubstring(`module "machinepool" requires "infra", which must be registered before it`)))
	})
}

func TestBoundModulesAreBuiltFromTheParsedFlags(t *testing.T) {
	g := NewWithT(t)
	var built []string
	reg, err := modules.NewRegistry(modules.Entry{Name: "a", BindFlags: func(fs *pflag.FlagSet) func() modules.Module {
		v := fs.String("a-value", "default", "")
		return func() modules.Module { built = append(built, *v); return named("a") }
	}}, entry("b"))
	g.Expect(err).NotTo(HaveOccurred())
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	bound := reg.BindFlags(fs)
	g.Expect(fs.Parse([]string{"--a-value=set"})).To(Succeed())
	mods, err := bound.Modules([]string{"a"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(mods)).To(Equal([]string{"a"}))
	g.Expect(built).To(Equal([]string{"set"}), "the constructor sees the parsed value")

	_, err = bound.Modules([]string{"c"})
	g.Expect(err).To(MatchError(ContainSubstring(`unknown module(s) "c"`)))
}

func TestCheck(t *testing.T) {
	g := NewWithT(t)
	g.Expect(modules.Check([]modules.Module{named("ipam"), named("infra")})).To(Succeed())
	g.Expect(modules.Check(nil)).To(MatchError(ContainSubstring("no module to run")))
	g.Expect(modules.Check([]modules.Module{named("a"), named("a")})).To(MatchError(ContainSubstring(`module "a" given twice`)))
}
