package backendset_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/capi-monolith/capi-monolith/infra/backend/backendset"
	"github.com/capi-monolith/capi-monolith/infra/backend/docker"
)

func TestTwoModulesBindingTheFlagsBothGetTheValues(t *testing.T) {
	g := NewWithT(t)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	var infra, pool backendset.Options
	infra.BindFlags(fs)
	g.Expect(func() { pool.BindFlags(fs) }).NotTo(Panic(), "a second binding defines nothing twice")

	g.Expect(fs.Parse([]string{"--docker-node-image-repository=example/node", "--docker-unprivileged-nodes"})).To(Succeed())
	for _, o := range []backendset.Options{infra, pool} {
		g.Expect(o.Docker.NodeImageRepository).To(Equal("example/node"))
		g.Expect(o.Docker.UnprivilegedNodes).To(BeTrue())
		g.Expect(o.Docker.LoadBalancerHostIP).To(Equal(docker.DefaultLoadBalancerHostIP), "an unset flag leaves both at its default")
	}
}

func TestABadValueIsRejectedOnce(t *testing.T) {
	g := NewWithT(t)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	var a, b backendset.Options
	a.BindFlags(fs)
	b.BindFlags(fs)
	g.Expect(fs.Parse([]string{"--docker-unprivileged-nodes=maybe"})).To(MatchError(ContainSubstring("docker-unprivileged-nodes")))
}
