package infra_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/capi-monolith/capi-monolith/infra"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
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

// The workload API's address and ports are checked when the flags are
// parsed: an address clients cannot dial and malformed ranges fail.
func TestInMemoryWorkloadFlags(t *testing.T) {
	g := NewWithT(t)
	parse := func(args ...string) (infra.Options, error) {
		o := infra.DefaultOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.BindFlags(fs)
		return o, fs.Parse(args)
	}
	o, err := parse()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.InMemoryWorkloadAddress.String()).To(Equal("127.0.0.1"))
	g.Expect(o.InMemoryWorkloadPorts.String()).To(Equal("20000-23999"))

	o, err = parse("--inmemory-workload-address=10.0.0.5", "--inmemory-workload-port-range=30000-30009")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.InMemoryWorkloadAddress.String()).To(Equal("10.0.0.5"))
	g.Expect(o.InMemoryWorkloadPorts.Size()).To(Equal(10))

	for _, bad := range []string{"localhost", "10.0.0.300"} {
		_, err = parse("--inmemory-workload-address=" + bad)
		g.Expect(err).To(HaveOccurred(), "address %q", bad)
	}
	// Every interface, only with a host clients dial instead.
	for _, any := range []string{"0.0.0.0", "::"} {
		o, err = parse("--inmemory-workload-address=" + any)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o.Validate()).To(MatchError(ContainSubstring("--inmemory-workload-advertise-host")), any)
	}
	o, err = parse("--inmemory-workload-address=0.0.0.0", "--inmemory-workload-advertise-host=capi-monolith-infrastructure-workload.capi-monolith-infrastructure.svc")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Validate()).To(Succeed())
	g.Expect(o.InMemoryWorkloadAdvertiseHost).To(Equal("capi-monolith-infrastructure-workload.capi-monolith-infrastructure.svc"))
	for _, bad := range []string{"0.0.0.0", "Not_A_Name", "a..b"} {
		_, err = parse("--inmemory-workload-advertise-host=" + bad)
		g.Expect(err).To(HaveOccurred(), "advertised host %q", bad)
	}
	for _, bad := range []string{"0-10", "20-10", "1-70000", "a-b", "100-"} {
		_, err = parse("--inmemory-workload-port-range=" + bad)
		g.Expect(err).To(MatchError(ContainSubstring("invalid port range")), "range %q", bad)
	}
}

// The workload limits have defaults and refuse bad values when parsed.
func TestInMemoryWorkloadLimitFlags(t *testing.T) {
	g := NewWithT(t)
	parse := func(args ...string) (infra.Options, error) {
		o := infra.DefaultOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.BindFlags(fs)
		return o, fs.Parse(args)
	}
	o, err := parse()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.InMemoryWorkloadLimits).To(Equal(store.Limits{
		MaxObjects: store.DefaultMaxObjects, MaxBytes: store.DefaultMaxBytes,
		MaxWatches: store.DefaultMaxWatches, MaxRequestsInFlight: store.DefaultMaxRequestsInFlight,
	}))

	o, err = parse("--inmemory-workload-max-objects=500", "--inmemory-workload-max-bytes=16Mi",
		"--inmemory-workload-max-watches=20", "--inmemory-workload-max-requests-inflight=5")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.InMemoryWorkloadLimits).To(Equal(store.Limits{MaxObjects: 500, MaxBytes: 16 << 20, MaxWatches: 20, MaxRequestsInFlight: 5}))
	_, err = parse("--inmemory-workload-max-bytes=20000000")
	g.Expect(err).NotTo(HaveOccurred())

	for flag, bad := range map[string][]string{
		"inmemory-workload-max-objects":           {"0", "-1", "99", "many", "1.5"},
		"inmemory-workload-max-bytes":             {"0", "1Mi", "-64Mi", "lots", "0.5"},
		"inmemory-workload-max-watches":           {"0", "-3", "x"},
		"inmemory-workload-max-requests-inflight": {"0", "-1", "ten"},
	} {
		for _, v := range bad {
			_, err = parse("--" + flag + "=" + v)
			g.Expect(err).To(MatchError(ContainSubstring(flag)), "--%s=%s", flag, v)
		}
	}
}
