package webhooks_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

const (
	byClusterWebhook         = `admission webhook "validation.monolithcluster.infrastructure.cluster.x-k8s.io" denied the request`
	byClusterTemplateWebhook = `admission webhook "validation.monolithclustertemplate.infrastructure.cluster.x-k8s.io" denied the request`
	byMachineWebhook         = `admission webhook "validation.monolithmachine.infrastructure.cluster.x-k8s.io" denied the request`
	byMachineTemplateWebhook = `admission webhook "validation.monolithmachinetemplate.infrastructure.cluster.x-k8s.io" denied the request`
	ipamGroup                = "ipam.cluster.x-k8s.io"
)

// expectOutcome checks err against wantErr: nil means accepted, otherwise
// a 422 whose message has every substring.
func expectOutcome(g Gomega, err error, wantErr []string) {
	if wantErr == nil {
		g.Expect(err).NotTo(HaveOccurred())
		return
	}
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want a 422, got %v", err)
	g.Expect(err).To(haveAll(wantErr...))
}

func TestCreate(t *testing.T) {
	both := v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{}, InMemory: &v1alpha1.InMemoryClusterBackend{}}
	tests := []struct {
		name    string
		obj     func(ns string) client.Object
		wantErr []string
	}{
		// The CRD allows one backend property exactly: the apiserver
		// answers before the webhook, naming the same field.
		{
			name:    "a cluster with both backends is rejected",
			obj:     func(ns string) client.Object { return cluster(ns, "c", v1alpha1.MonolithClusterSpec{Backend: both}) },
			wantErr: []string{"spec.backend"},
		},
		{
			name:    "a cluster with no backend is rejected",
			obj:     func(ns string) client.Object { return cluster(ns, "c", v1alpha1.MonolithClusterSpec{}) },
			wantErr: []string{"spec.backend"},
		},
		{
			name: "a cluster template with both backends is rejected",
			obj: func(ns string) client.Object {
				return clusterTemplate(ns, "t", v1alpha1.MonolithClusterSpec{Backend: both})
			},
			wantErr: []string{"spec.template.spec.backend"},
		},
		{
			name: "an endpoint port above 65535 is rejected",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{
					Backend: dockerBackend(), ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 70000},
				})
			},
			wantErr: []string{"spec.controlPlaneEndpoint.port", "70000"},
		},
		{
			name: "an endpoint host without a port is rejected",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{
					Backend: dockerBackend(), ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.1"},
				})
			},
			wantErr: []string{byClusterWebhook, "spec.controlPlaneEndpoint.port: Required value: a port is required with a host; leave both empty to let the backend choose the endpoint"},
		},
		{
			name: "an endpoint port without a host is rejected",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{
					Backend: inMemoryBackend(), ControlPlaneEndpoint: clusterv1.APIEndpoint{Port: 6443},
				})
			},
			wantErr: []string{byClusterWebhook, "spec.controlPlaneEndpoint.host: Required value: a host is required with a port"},
		},
		{
			name: "an endpoint host that is neither an IP address nor a DNS name is rejected",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{
					Backend: dockerBackend(), ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "api_server.local", Port: 6443},
				})
			},
			wantErr: []string{byClusterWebhook, `spec.controlPlaneEndpoint.host: Invalid value: "api_server.local": must be an IP address or a DNS-1123 subdomain`},
		},
		{
			name: "an invalid Docker network name is rejected",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{
					Backend: v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{Network: "-my net"}},
				})
			},
			wantErr: []string{byClusterWebhook, `spec.backend.docker.network: Invalid value: "-my net": must be a Docker network name`},
		},
		{
			name: "Docker's host network (nodes in the host's network namespace) is rejected",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{
					Backend: v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{Network: "host"}},
				})
			},
			wantErr: []string{byClusterWebhook, `spec.backend.docker.network: Invalid value: "host": must not be one of Docker's predefined networks (bridge, default, docker_gwbridge, host, ingress, nat, none)`},
		},
		{
			name: "a predefined Docker network is rejected in a template too, whatever its case",
			obj: func(ns string) client.Object {
				return clusterTemplate(ns, "t", v1alpha1.MonolithClusterSpec{
					Backend: v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{Network: "None"}},
				})
			},
			wantErr: []string{byClusterTemplateWebhook, `spec.template.spec.backend.docker.network: Invalid value: "None": must not be one of Docker's predefined networks`},
		},
		{
			name: "an unparsable nodeCIDR is rejected",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{
					Backend: v1alpha1.ClusterBackend{InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: "10.128.0.0/33"}},
				})
			},
			wantErr: []string{byClusterWebhook, `spec.backend.inMemory.nodeCIDR: Invalid value: "10.128.0.0/33": must be a CIDR such as 10.128.0.0/16`},
		},
		{
			name: "a nodeCIDR without room for a node is rejected",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{
					Backend: v1alpha1.ClusterBackend{InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: "10.128.0.0/31"}},
				})
			},
			wantErr: []string{`spec.backend.inMemory.nodeCIDR: Invalid value: "10.128.0.0/31": leaves no address for a node: the prefix length must be at most 30 for IPv4`},
		},
		{
			// The CRD's list map rejects the repeated key before the webhook.
			name: "a duplicate failure domain name is rejected",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{
					Backend:        inMemoryBackend(),
					FailureDomains: []clusterv1.FailureDomain{{Name: "fd-a"}, {Name: "fd-b"}, {Name: "fd-a"}},
				})
			},
			wantErr: []string{"spec.failureDomains[2]", "Duplicate value"},
		},
		{
			name: "every problem of a cluster template is reported at once",
			obj: func(ns string) client.Object {
				return clusterTemplate(ns, "t", v1alpha1.MonolithClusterSpec{
					Backend:              v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{Network: "my net"}},
					ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "Bad_Host"},
				})
			},
			wantErr: []string{
				byClusterTemplateWebhook,
				`spec.template.spec.backend.docker.network: Invalid value: "my net"`,
				`spec.template.spec.controlPlaneEndpoint.port: Required value`,
				`spec.template.spec.controlPlaneEndpoint.host: Invalid value: "Bad_Host"`,
			},
		},
		{
			name: "a docker cluster with an IPv6 endpoint and failure domains is accepted",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{
					Backend:              v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{Network: "my_net.1", LoadBalancerHostPort: 7443}},
					ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "fd00::10", Port: 6443},
					FailureDomains:       []clusterv1.FailureDomain{{Name: "fd-a"}, {Name: "fd-b"}},
				})
			},
		},
		{
			name: "an inMemory cluster template with a DNS endpoint is accepted",
			obj: func(ns string) client.Object {
				return clusterTemplate(ns, "t", v1alpha1.MonolithClusterSpec{
					Backend:              v1alpha1.ClusterBackend{InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: "10.200.0.0/30"}},
					ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "api.example.com", Port: 443},
				})
			},
		},
		{
			name: "a machine with both backends is rejected",
			obj: func(ns string) client.Object {
				return machine(ns, "m", v1alpha1.MonolithMachineSpec{Backend: v1alpha1.MachineBackend{
					Docker: &v1alpha1.DockerMachineBackend{}, InMemory: &v1alpha1.InMemoryMachineBackend{},
				}})
			},
			wantErr: []string{"spec.backend"},
		},
		{
			name: "a machine asking a pool twice is rejected",
			obj: func(ns string) client.Object {
				return machine(ns, "m", v1alpha1.MonolithMachineSpec{
					Backend: inMemoryMachineBackend(),
					AddressesFromPools: []corev1.TypedLocalObjectReference{
						poolRef(ipamGroup, "MonolithIPPool", "pool"),
						poolRef(ipamGroup, "GlobalMonolithIPPool", "pool"),
						poolRef(ipamGroup, "MonolithIPPool", "pool"),
					},
				})
			},
			wantErr: []string{byMachineWebhook, `spec.addressesFromPools[2]: Duplicate value: "MonolithIPPool.ipam.cluster.x-k8s.io pool"`},
		},
		{
			name: "a simulated delay over an hour is rejected",
			obj: func(ns string) client.Object {
				return machine(ns, "m", v1alpha1.MonolithMachineSpec{
					Backend: v1alpha1.MachineBackend{InMemory: &v1alpha1.InMemoryMachineBackend{ProvisioningDelay: duration(2 * time.Hour)}},
				})
			},
			wantErr: []string{byMachineWebhook, `spec.backend.inMemory.provisioningDelay: Invalid value: "2h0m0s": must be at most 15m0s`},
		},
		{
			name: "every problem of a machine is reported at once",
			obj: func(ns string) client.Object {
				return machine(ns, "m", v1alpha1.MonolithMachineSpec{
					Backend: v1alpha1.MachineBackend{InMemory: &v1alpha1.InMemoryMachineBackend{
						ProvisioningDelay: duration(-time.Second), BootstrapDelay: duration(-2 * time.Second),
					}},
					AddressesFromPools: []corev1.TypedLocalObjectReference{{}},
				})
			},
			wantErr: []string{
				byMachineWebhook,
				`spec.backend.inMemory.provisioningDelay: Invalid value: "-1s": must not be negative`,
				`spec.backend.inMemory.bootstrapDelay: Invalid value: "-2s": must not be negative`,
				`spec.addressesFromPools[0].apiGroup: Required value: the API group of the pool is required, e.g. ipam.cluster.x-k8s.io`,
				`spec.addressesFromPools[0].kind: Required value`,
				`spec.addressesFromPools[0].name: Required value`,
			},
		},
		{
			name: "a machine template asking a pool twice is rejected",
			obj: func(ns string) client.Object {
				return machineTemplate(ns, "t", v1alpha1.MonolithMachineSpec{
					Backend: dockerMachineBackend(),
					AddressesFromPools: []corev1.TypedLocalObjectReference{
						poolRef(ipamGroup, "MonolithIPPool", "pool"), poolRef(ipamGroup, "MonolithIPPool", "pool"),
					},
				})
			},
			wantErr: []string{byMachineTemplateWebhook, `spec.template.spec.addressesFromPools[1]: Duplicate value`},
		},
		{
			name: "a machine with pools and delays is accepted",
			obj: func(ns string) client.Object {
				return machine(ns, "m", v1alpha1.MonolithMachineSpec{
					Backend: v1alpha1.MachineBackend{InMemory: &v1alpha1.InMemoryMachineBackend{ProvisioningDelay: duration(time.Second)}},
					AddressesFromPools: []corev1.TypedLocalObjectReference{
						poolRef(ipamGroup, "MonolithIPPool", "a"), poolRef(ipamGroup, "MonolithIPPool", "b"),
					},
				})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := env.Namespace(t, "create")
			err := env.Client.Create(t.Context(), tt.obj(ns))
			expectOutcome(g, err, tt.wantErr)
		})
	}
}

func TestMachineBackendMustMatchItsCluster(t *testing.T) {
	tests := []struct {
		name string
		// existing objects are created (and seen by the webhook) first.
		existing     func(ns string) []client.Object
		obj          func(ns string) client.Object
		wantErr      []string
		wantWarnings []string
	}{
		{
			name: "a docker machine of an inMemory cluster is rejected",
			existing: func(ns string) []client.Object {
				return []client.Object{
					capiCluster(ns, "c1", "MonolithCluster", "mc"),
					cluster(ns, "mc", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()}),
				}
			},
			obj: func(ns string) client.Object {
				return inCluster(machine(ns, "m", v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend()}), "c1")
			},
			wantErr: []string{byMachineWebhook, `spec.backend: Invalid value: "docker": must be the backend of the machine's cluster: MonolithCluster mc of Cluster c1 uses inMemory`},
		},
		{
			name: "an inMemory machine of a docker cluster is rejected",
			existing: func(ns string) []client.Object {
				return []client.Object{
					capiCluster(ns, "c1", "MonolithCluster", "mc"),
					cluster(ns, "mc", v1alpha1.MonolithClusterSpec{Backend: dockerBackend()}),
				}
			},
			obj: func(ns string) client.Object {
				return inCluster(machine(ns, "m", v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()}), "c1")
			},
			wantErr: []string{`spec.backend: Invalid value: "inMemory": must be the backend of the machine's cluster: MonolithCluster mc of Cluster c1 uses docker`},
		},
		{
			name: "a machine with its cluster's backend is accepted",
			existing: func(ns string) []client.Object {
				return []client.Object{
					capiCluster(ns, "c1", "MonolithCluster", "mc"),
					cluster(ns, "mc", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()}),
				}
			},
			obj: func(ns string) client.Object {
				return inCluster(machine(ns, "m", v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()}), "c1")
			},
		},
		{
			name: "a machine whose Cluster does not exist yet is accepted",
			obj: func(ns string) client.Object {
				return inCluster(machine(ns, "m", v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend()}), "c1")
			},
		},
		{
			name: "a machine whose MonolithCluster does not exist yet is accepted",
			existing: func(ns string) []client.Object {
				return []client.Object{capiCluster(ns, "c1", "MonolithCluster", "mc")}
			},
			obj: func(ns string) client.Object {
				return inCluster(machine(ns, "m", v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend()}), "c1")
			},
		},
		{
			name: "a machine of a Cluster with another provider's infrastructure is accepted with a warning",
			existing: func(ns string) []client.Object {
				return []client.Object{capiCluster(ns, "c1", "FooCluster", "foo")}
			},
			obj: func(ns string) client.Object {
				return inCluster(machine(ns, "m", v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend()}), "c1")
			},
			wantWarnings: []string{"Cluster c1 has a FooCluster.infrastructure.example.com as its infrastructure, not a MonolithCluster: this machine will not be provisioned"},
		},
		{
			name: "a machine without a cluster label is accepted",
			existing: func(ns string) []client.Object {
				return []client.Object{
					capiCluster(ns, "c1", "MonolithCluster", "mc"),
					cluster(ns, "mc", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()}),
				}
			},
			obj: func(ns string) client.Object {
				return machine(ns, "m", v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend()})
			},
		},
		{
			name: "a machine template is not compared with a cluster",
			existing: func(ns string) []client.Object {
				return []client.Object{
					capiCluster(ns, "c1", "MonolithCluster", "mc"),
					cluster(ns, "mc", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()}),
				}
			},
			obj: func(ns string) client.Object {
				return inCluster(machineTemplate(ns, "t", v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend()}), "c1")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := env.Namespace(t, "match")
			if tt.existing != nil {
				for _, obj := range tt.existing(ns) {
					createSeen(t, g, obj)
				}
			}
			c, w := warningClient(t, g)
			err := c.Create(t.Context(), tt.obj(ns))
			expectOutcome(g, err, tt.wantErr)
			if tt.wantWarnings == nil {
				g.Expect(w.Get()).To(BeEmpty())
			} else {
				g.Expect(w.Get()).To(Equal(tt.wantWarnings))
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		name string
		obj  func(ns string) client.Object
		// want is the backend read back after the create.
		want v1alpha1.ClusterBackend
	}{
		{
			name: "a docker cluster gets kind's network and the haproxy image",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{Backend: dockerBackend()})
			},
			want: v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{
				Network: "kind", LoadBalancerImage: "kindest/haproxy:v20230606-42a2262b",
			}},
		},
		{
			name: "an inMemory cluster gets the default node CIDR",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()})
			},
			want: v1alpha1.ClusterBackend{InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: "10.128.0.0/16"}},
		},
		{
			name: "a docker cluster keeps the network and image it names",
			obj: func(ns string) client.Object {
				return cluster(ns, "c", v1alpha1.MonolithClusterSpec{Backend: v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{
					Network: "mine", LoadBalancerImage: "example.com/haproxy:1", LoadBalancerHostPort: 7443,
				}}})
			},
			want: v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{
				Network: "mine", LoadBalancerImage: "example.com/haproxy:1", LoadBalancerHostPort: 7443,
			}},
		},
		{
			name: "a docker cluster template gets the defaults in its template",
			obj: func(ns string) client.Object {
				return clusterTemplate(ns, "t", v1alpha1.MonolithClusterSpec{Backend: dockerBackend()})
			},
			want: v1alpha1.ClusterBackend{Docker: &v1alpha1.DockerClusterBackend{
				Network: v1alpha1.DefaultDockerNetwork, LoadBalancerImage: v1alpha1.DefaultDockerLoadBalancerImage,
			}},
		},
		{
			name: "an inMemory cluster template keeps the node CIDR it names",
			obj: func(ns string) client.Object {
				return clusterTemplate(ns, "t", v1alpha1.MonolithClusterSpec{Backend: v1alpha1.ClusterBackend{
					InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: "fd00:1::/64"},
				}})
			},
			want: v1alpha1.ClusterBackend{InMemory: &v1alpha1.InMemoryClusterBackend{NodeCIDR: "fd00:1::/64"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := tt.obj(env.Namespace(t, "defaults"))
			g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
			// The object the create returns is what the apiserver stored.
			switch o := obj.(type) {
			case *v1alpha1.MonolithCluster:
				g.Expect(o.Spec.Backend).To(Equal(tt.want))
			case *v1alpha1.MonolithClusterTemplate:
				g.Expect(o.Spec.Template.Spec.Backend).To(Equal(tt.want))
			}
		})
	}
}

func TestClusterUpdate(t *testing.T) {
	// Each case's cluster stays: each has an endpoint of its own, since
	// no two MonolithClusters may record one.
	endpoint := func(host string) clusterv1.APIEndpoint { return clusterv1.APIEndpoint{Host: host, Port: 6443} }
	tests := []struct {
		name    string
		spec    v1alpha1.MonolithClusterSpec
		mutate  func(c *v1alpha1.MonolithCluster)
		wantErr []string
	}{
		{
			name: "changing the backend from inMemory to docker is rejected",
			spec: v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()},
			mutate: func(c *v1alpha1.MonolithCluster) {
				c.Spec.Backend = dockerBackend()
			},
			wantErr: []string{byClusterWebhook, "spec.backend: Forbidden: the backend cannot change from inMemory to docker; create a new cluster instead"},
		},
		{
			name:    "changing a set endpoint is rejected",
			spec:    v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend(), ControlPlaneEndpoint: endpoint("10.0.0.1")},
			mutate:  func(c *v1alpha1.MonolithCluster) { c.Spec.ControlPlaneEndpoint.Port = 6444 },
			wantErr: []string{byClusterWebhook, "spec.controlPlaneEndpoint: Forbidden: cannot change once set; it is 10.0.0.1:6443"},
		},
		{
			name:    "removing a set endpoint is rejected",
			spec:    v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend(), ControlPlaneEndpoint: endpoint("10.0.0.2")},
			mutate:  func(c *v1alpha1.MonolithCluster) { c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{} },
			wantErr: []string{"spec.controlPlaneEndpoint: Forbidden: cannot change once set"},
		},
		{
			name:   "setting the endpoint of a cluster without one is accepted",
			spec:   v1alpha1.MonolithClusterSpec{Backend: dockerBackend()},
			mutate: func(c *v1alpha1.MonolithCluster) { c.Spec.ControlPlaneEndpoint = endpoint("10.0.0.3") },
		},
		{
			name:    "an update into an invalid node CIDR is rejected",
			spec:    v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()},
			mutate:  func(c *v1alpha1.MonolithCluster) { c.Spec.Backend.InMemory.NodeCIDR = "10.1.2.3" },
			wantErr: []string{byClusterWebhook, `spec.backend.inMemory.nodeCIDR: Invalid value: "10.1.2.3": must be a CIDR`},
		},
		{
			name: "a metadata-only update is accepted",
			spec: v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend(), ControlPlaneEndpoint: endpoint("10.0.0.4")},
			mutate: func(c *v1alpha1.MonolithCluster) {
				c.Labels = map[string]string{"team": "a"}
				c.Finalizers = []string{v1alpha1.ClusterFinalizer}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := cluster(env.Namespace(t, "cluster-update"), "c", tt.spec)
			g.Expect(env.Client.Create(t.Context(), c)).To(Succeed())
			tt.mutate(c)
			expectOutcome(g, env.Client.Update(t.Context(), c), tt.wantErr)
		})
	}
}

func TestMachineUpdate(t *testing.T) {
	const immutable = "is immutable: a MonolithMachine keeps its spec (except providerID and failureDomain, set once, and spec.backend.inMemory, updated in place)"
	tests := []struct {
		name    string
		spec    v1alpha1.MonolithMachineSpec
		labels  map[string]string
		mutate  func(m *v1alpha1.MonolithMachine)
		wantErr []string
		// notInErr is a field the message must not name.
		notInErr string
	}{
		{
			name:   "setting the cluster-name label from empty is accepted",
			spec:   v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()},
			mutate: func(m *v1alpha1.MonolithMachine) { inCluster(m, "c") },
		},
		{
			name:    "changing the cluster-name label (which would orphan the node) is rejected",
			spec:    v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()},
			labels:  map[string]string{clusterv1.ClusterNameLabel: "c"},
			mutate:  func(m *v1alpha1.MonolithMachine) { inCluster(m, "other") },
			wantErr: []string{byMachineWebhook, `metadata.labels[cluster.x-k8s.io/cluster-name]: Forbidden: cannot change or be removed once set; it is "c"`},
		},
		{
			name:    "removing the cluster-name label is rejected",
			spec:    v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()},
			labels:  map[string]string{clusterv1.ClusterNameLabel: "c", "team": "a"},
			mutate:  func(m *v1alpha1.MonolithMachine) { delete(m.Labels, clusterv1.ClusterNameLabel) },
			wantErr: []string{`metadata.labels[cluster.x-k8s.io/cluster-name]: Forbidden`},
		},
		{
			name:   "setting providerID from empty is accepted",
			spec:   v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()},
			mutate: func(m *v1alpha1.MonolithMachine) { m.Spec.ProviderID = "inmemory://ns/m" },
		},
		{
			name:    "changing a set providerID is rejected",
			spec:    v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend(), ProviderID: "inmemory://ns/m"},
			mutate:  func(m *v1alpha1.MonolithMachine) { m.Spec.ProviderID = "inmemory://ns/other" },
			wantErr: []string{byMachineWebhook, `spec.providerID: Forbidden: cannot change once set; it is "inmemory://ns/m"`},
		},
		{
			name:   "setting failureDomain from empty is accepted",
			spec:   v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()},
			mutate: func(m *v1alpha1.MonolithMachine) { m.Spec.FailureDomain = "fd-a" },
		},
		{
			name:    "clearing a set failureDomain is rejected",
			spec:    v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend(), FailureDomain: "fd-a"},
			mutate:  func(m *v1alpha1.MonolithMachine) { m.Spec.FailureDomain = "" },
			wantErr: []string{`spec.failureDomain: Forbidden: cannot change once set; it is "fd-a"`},
		},
		{
			name:    "changing the backend is rejected",
			spec:    v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()},
			mutate:  func(m *v1alpha1.MonolithMachine) { m.Spec.Backend = dockerMachineBackend() },
			wantErr: []string{byMachineWebhook, "spec.backend: Forbidden: " + immutable},
		},
		{
			name:   "changing an inMemory setting is accepted: it changes in place",
			spec:   v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend(), ProviderID: "inmemory://ns/m"},
			mutate: func(m *v1alpha1.MonolithMachine) { m.Spec.Backend.InMemory.BootstrapDelay = duration(time.Second) },
		},
		{
			name:    "an invalid inMemory setting is rejected",
			spec:    v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()},
			mutate:  func(m *v1alpha1.MonolithMachine) { m.Spec.Backend.InMemory.BootstrapDelay = duration(-time.Second) },
			wantErr: []string{byMachineWebhook, "spec.backend.inMemory.bootstrapDelay: Invalid value"},
		},
		{
			name:    "changing a docker setting is rejected",
			spec:    v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend()},
			mutate:  func(m *v1alpha1.MonolithMachine) { m.Spec.Backend.Docker.Image = "kindest/node:v1.36.3" },
			wantErr: []string{"spec.backend: Forbidden: " + immutable},
		},
		{
			name: "adding a pool while setting providerID reports the pool only",
			spec: v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()},
			mutate: func(m *v1alpha1.MonolithMachine) {
				m.Spec.ProviderID = "inmemory://ns/m"
				m.Spec.AddressesFromPools = []corev1.TypedLocalObjectReference{poolRef(ipamGroup, "MonolithIPPool", "p")}
			},
			wantErr:  []string{"spec.addressesFromPools: Forbidden: " + immutable},
			notInErr: "spec.providerID",
		},
		{
			name: "a metadata-only update is accepted",
			spec: v1alpha1.MonolithMachineSpec{Backend: dockerMachineBackend(), ProviderID: "docker:////m"},
			mutate: func(m *v1alpha1.MonolithMachine) {
				m.Labels = map[string]string{"team": "a"}
				m.Finalizers = []string{v1alpha1.MachineFinalizer}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := machine(env.Namespace(t, "machine-update"), "m", tt.spec)
			m.Labels = tt.labels
			g.Expect(env.Client.Create(t.Context(), m)).To(Succeed())
			tt.mutate(m)
			err := env.Client.Update(t.Context(), m)
			expectOutcome(g, err, tt.wantErr)
			if tt.notInErr != "" {
				g.Expect(err).NotTo(MatchError(ContainSubstring(tt.notInErr)))
			}
		})
	}
}

// TestTemplateUpdate sends one spec change to each template kind in the
// ways a client can: only the topology controller's dry-run gets through.
func TestTemplateUpdate(t *testing.T) {
	type kind struct {
		name    string
		webhook string
		create  func(ns string) client.Object
		// change makes a valid spec change, breakSpec an invalid one.
		change, breakSpec func(client.Object)
		// brokenErr is the message of breakSpec's problem.
		brokenErr string
	}
	kinds := []kind{
		{
			name:    "MonolithClusterTemplate",
			webhook: byClusterTemplateWebhook,
			create: func(ns string) client.Object {
				return clusterTemplate(ns, "t", v1alpha1.MonolithClusterSpec{Backend: inMemoryBackend()})
			},
			change: func(o client.Object) {
				o.(*v1alpha1.MonolithClusterTemplate).Spec.Template.Spec.Backend.InMemory.NodeCIDR = "10.129.0.0/16"
			},
			breakSpec: func(o client.Object) {
				o.(*v1alpha1.MonolithClusterTemplate).Spec.Template.Spec.Backend.InMemory.NodeCIDR = "nope"
			},
			brokenErr: `spec.template.spec.backend.inMemory.nodeCIDR: Invalid value: "nope"`,
		},
		{
			name:    "MonolithMachineTemplate",
			webhook: byMachineTemplateWebhook,
			create: func(ns string) client.Object {
				return machineTemplate(ns, "t", v1alpha1.MonolithMachineSpec{Backend: inMemoryMachineBackend()})
			},
			change: func(o client.Object) {
				o.(*v1alpha1.MonolithMachineTemplate).Spec.Template.Spec.Backend.InMemory.ProvisioningDelay = duration(5 * time.Second)
			},
			breakSpec: func(o client.Object) {
				o.(*v1alpha1.MonolithMachineTemplate).Spec.Template.Spec.Backend.InMemory.ProvisioningDelay = duration(-5 * time.Second)
			},
			brokenErr: `spec.template.spec.backend.inMemory.provisioningDelay: Invalid value: "-5s": must not be negative`,
		},
	}
	markDryRun := func(o client.Object) {
		o.SetAnnotations(map[string]string{clusterv1.TopologyDryRunAnnotation: ""})
	}
	ways := []struct {
		name string
		send func(t *testing.T, g Gomega, k kind, o client.Object) error
		// rejected: the change is refused as immutable.
		rejected bool
		// brokenErr: the spec is broken, and its problem reported.
		brokenErr bool
	}{
		{
			name: "a spec update is rejected",
			send: func(t *testing.T, _ Gomega, k kind, o client.Object) error {
				k.change(o)
				return env.Client.Update(t.Context(), o)
			},
			rejected: true,
		},
		{
			name: "the topology controller's dry-run apply of a spec change is accepted",
			send: func(t *testing.T, g Gomega, k kind, o client.Object) error {
				k.change(o)
				markDryRun(o)
				return applyAs(t, g, o, topologyManager, client.DryRunAll)
			},
		},
		{
			name: "the topology controller's dry-run apply of a broken spec is rejected for the break only",
			send: func(t *testing.T, g Gomega, k kind, o client.Object) error {
				k.breakSpec(o)
				markDryRun(o)
				return applyAs(t, g, o, topologyManager, client.DryRunAll)
			},
			brokenErr: true,
		},
		{
			name: "a dry-run update by another manager is rejected",
			send: func(t *testing.T, _ Gomega, k kind, o client.Object) error {
				k.change(o)
				return env.Client.Update(t.Context(), o, client.DryRunAll, client.FieldOwner("kubectl-edit"))
			},
			rejected: true,
		},
		{
			// The annotation, not the manager, marks the topology
			// controller's dry-runs (Cluster API's IsDryRunRequest).
			name: "a dry-run apply by capi-topology without the dry-run annotation is rejected",
			send: func(t *testing.T, g Gomega, k kind, o client.Object) error {
				k.change(o)
				return applyAs(t, g, o, topologyManager, client.DryRunAll)
			},
			rejected: true,
		},
		{
			name: "a real apply carrying the dry-run annotation is rejected",
			send: func(t *testing.T, g Gomega, k kind, o client.Object) error {
				k.change(o)
				markDryRun(o)
				return applyAs(t, g, o, topologyManager)
			},
			rejected: true,
		},
		{
			name: "a metadata-only update is accepted",
			send: func(t *testing.T, _ Gomega, _ kind, o client.Object) error {
				o.SetLabels(map[string]string{"team": "a"})
				return env.Client.Update(t.Context(), o)
			},
		},
	}
	for _, k := range kinds {
		for _, w := range ways {
			t.Run(k.name+": "+w.name, func(t *testing.T) {
				g := NewWithT(t)
				obj := k.create(env.Namespace(t, "template-update"))
				g.Expect(env.Client.Create(t.Context(), obj)).To(Succeed())
				stored := obj.DeepCopyObject().(client.Object)

				err := w.send(t, g, k, obj)
				switch {
				case w.rejected:
					expectOutcome(g, err, []string{k.webhook, fmt.Sprintf(
						"spec: Forbidden: a %s's spec is immutable; create a new template and point the cluster (or its ClusterClass) at it", k.name)})
				case w.brokenErr:
					expectOutcome(g, err, []string{k.webhook, k.brokenErr})
					g.Expect(err).NotTo(MatchError(ContainSubstring("is immutable")))
				default:
					g.Expect(err).NotTo(HaveOccurred())
				}

				// Nothing but the metadata-only update changes what is stored.
				current := stored.DeepCopyObject().(client.Object)
				g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(stored), current)).To(Succeed())
				g.Expect(specOf(current)).To(Equal(specOf(stored)))
			})
		}
	}
}

func specOf(o client.Object) any {
	switch o := o.(type) {
	case *v1alpha1.MonolithClusterTemplate:
		return o.Spec
	case *v1alpha1.MonolithMachineTemplate:
		return o.Spec
	}
	return nil
}
