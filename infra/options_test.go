package infra_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/capi-monolith/capi-monolith/infra"
)

// A bad --docker-management-cluster fails when the flags are parsed; empty
// (derive from kube-system) is the default.
func TestDockerManagementClusterFlag(t *testing.T) {
	g := NewWithT(t)
	parse := func(args ...string) (infra.Options, error) {
		o := infra.DefaultOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.BindFlags(fs)
		return o, fs.Parse(args)
	}
	o, err := parse()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.DockerManagementCluster).To(BeEmpty())
	o, err = parse("--docker-management-cluster=dev-1.a_b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.DockerManagementCluster).To(Equal("dev-1.a_b"))
	for _, bad := range []string{"a=b", "a b", "x,y"} {
		_, err = parse("--docker-management-cluster=" + bad)
		g.Expect(err).To(MatchError(ContainSubstring("management cluster identity")), "value %q", bad)
	}
}
