package modules_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/modules"
)

type named string

func (n named) Name() string                    { return string(n) }
func (named) AddToScheme(*runtime.Scheme) error { return nil }
func (named) SetupWithManager(context.Context, ctrl.Manager, modules.Options) error {
	return nil
}

func names(mods []modules.Module) []string {
	var out []string
	for _, m := range mods {
		out = append(out, m.Name())
	}
	return out
}

func TestResolve(t *testing.T) {
	reg, err := modules.NewRegistry(named("infra"), named("machinepool"), named("ipam"), named("runtimeext"))
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
			g.Expect(names(got)).To(Equal(tt.want))
		})
	}
}

func TestNewRegistry(t *testing.T) {
	t.Run("a name registered twice is refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := modules.NewRegistry(named("ipam"), named("ipam"))
		g.Expect(err).To(MatchError(ContainSubstring(`module "ipam" registered twice`)))
	})
	t.Run("an empty name is refused", func(t *testing.T) {
		g := NewWithT(t)
		_, err := modules.NewRegistry(named(""))
		g.Expect(err).To(HaveOccurred())
	})
	t.Run("names keep registry order", func(t *testing.T) {
		g := NewWithT(t)
		reg, err := modules.NewRegistry(named("b"), named("a"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reg.Names()).To(Equal([]string{"b", "a"}))
	})
}
