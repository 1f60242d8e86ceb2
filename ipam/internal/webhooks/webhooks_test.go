package webhooks_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
)

// Every case uses its own 10.<n>.0.0/16 so that the global pools some cases
// leave behind never overlap the pools of another case.

const (
	byMonolithWebhook = `admission webhook "validation.monolithippool.ipam.cluster.x-k8s.io" denied the request`
	byGlobalWebhook   = `admission webhook "validation.globalmonolithippool.ipam.cluster.x-k8s.io" denied the request`
	allowOverlapHint  = `set the annotation ipam.capi-monolith.dev/allow-overlap: "true" to allow overlapping pools`
)

func TestCreate(t *testing.T) {
	type names struct{ ns, other string }
	tests := []struct {
		name string
		// existing pools are created (and seen by the webhook) first.
		existing     func(n names) []client.Object
		pool         func(n names) client.Object
		wantErr      func(n names) []string
		wantWarnings func(n names) []string
	}{
		{
			name: "an unparsable address is rejected",
			pool: func(n names) client.Object { return namespaced(n.ns, "p", spec(24, "10.1.0.300")) },
			wantErr: func(names) []string {
				return []string{byMonolithWebhook, `spec.addresses[0]: Invalid value: "10.1.0.300": not a valid IP address, range (a-b) or CIDR`}
			},
		},
		{
			name: "a reversed range is rejected",
			pool: func(n names) client.Object { return namespaced(n.ns, "p", spec(24, "10.2.0.9-10.2.0.1")) },
			wantErr: func(names) []string {
				return []string{`spec.addresses[0]: Invalid value: "10.2.0.9-10.2.0.1": range start is after range end`}
			},
		},
		{
			name: "an IPv6 address in an IPv4 pool is rejected",
			pool: func(n names) client.Object { return namespaced(n.ns, "p", spec(24, "10.3.0.0/24", "fd00:3::1")) },
			wantErr: func(names) []string {
				return []string{`spec.addresses[1]: Invalid value: "fd00:3::1": IPv4 and IPv6 cannot be mixed in one pool`}
			},
		},
		{
			name: "an IPv6 exclusion in an IPv4 pool is rejected",
			pool: func(n names) client.Object {
				s := spec(24, "10.4.0.0/24")
				s.ExcludedAddresses = []string{"10.4.0.7", "fd00:4::1"}
				return namespaced(n.ns, "p", s)
			},
			wantErr: func(names) []string {
				return []string{`spec.excludedAddresses[1]: Invalid value: "fd00:4::1": IPv4 and IPv6 cannot be mixed in one pool`}
			},
		},
		{
			name: "an IPv6 gateway in an IPv4 pool is rejected",
			pool: func(n names) client.Object {
				s := spec(24, "10.5.0.0/24")
				s.Gateway = "fd00:5::1"
				return namespaced(n.ns, "p", s)
			},
			wantErr: func(names) []string {
				return []string{`spec.gateway: Invalid value: "fd00:5::1": IPv4 and IPv6 cannot be mixed in one pool`}
			},
		},
		{
			name: "an entry outside the subnet of the first address and prefix is rejected",
			pool: func(n names) client.Object { return namespaced(n.ns, "p", spec(24, "10.6.0.0/24", "10.6.1.5")) },
			wantErr: func(names) []string {
				return []string{`spec.addresses[1]: Invalid value: "10.6.1.5": entry is not inside the pool subnet 10.6.0.0/24`}
			},
		},
		{
			name: "a gateway outside the subnet is rejected",
			pool: func(n names) client.Object {
				s := spec(24, "10.7.0.0/24")
				s.Gateway = "10.7.1.1"
				return namespaced(n.ns, "p", s)
			},
			wantErr: func(names) []string {
				return []string{`spec.gateway: Invalid value: "10.7.1.1": gateway is not inside the pool subnet 10.7.0.0/24`}
			},
		},
		{
			name: "an IPv4 prefix of 33 is rejected",
			pool: func(n names) client.Object { return namespaced(n.ns, "p", spec(33, "10.8.0.0/24")) },
			wantErr: func(names) []string {
				return []string{`spec.prefix: Invalid value: 33: prefix out of range: 33 is not between 0 and 32 for IPv4`}
			},
		},
		{
			name: "every problem of a spec is reported at once",
			pool: func(n names) client.Object {
				s := spec(24, "nope", "10.9.0.0/24", "10.9.0.9-10.9.0.1")
				s.ExcludedAddresses = []string{"fd00:9::1"}
				s.Gateway = "10.9.1.1"
				return global("g-"+n.ns, s)
			},
			wantErr: func(n names) []string {
				return []string{
					byGlobalWebhook,
					fmt.Sprintf(`GlobalMonolithIPPool.ipam.cluster.x-k8s.io "g-%s" is invalid`, n.ns),
					`spec.addresses[0]: Invalid value: "nope"`,
					`spec.addresses[2]: Invalid value: "10.9.0.9-10.9.0.1": range start is after range end`,
					`spec.excludedAddresses[0]: Invalid value: "fd00:9::1": IPv4 and IPv6 cannot be mixed`,
					`spec.gateway: Invalid value: "10.9.1.1": gateway is not inside the pool subnet 10.9.0.0/24`,
				}
			},
		},
		{
			name: "a pool overlapping a namespaced pool in another namespace is rejected",
			existing: func(n names) []client.Object {
				return []client.Object{namespaced(n.other, "existing", spec(24, "10.20.0.0/24"))}
			},
			pool: func(n names) client.Object { return namespaced(n.ns, "p", spec(24, "10.20.0.128/25")) },
			wantErr: func(n names) []string {
				return []string{
					byMonolithWebhook,
					fmt.Sprintf(`spec.addresses: Forbidden: overlaps a MonolithIPPool of another namespace at 10.20.0.128-10.20.0.254; %s`, allowOverlapHint),
				}
			},
		},
		{
			name: "a pool overlapping a pool of its own namespace is rejected, naming it",
			existing: func(n names) []client.Object {
				return []client.Object{namespaced(n.ns, "existing", spec(24, "10.19.0.0/24"))}
			},
			pool: func(n names) client.Object { return namespaced(n.ns, "p", spec(24, "10.19.0.128/25")) },
			wantErr: func(n names) []string {
				return []string{fmt.Sprintf(`spec.addresses: Forbidden: overlaps MonolithIPPool %s/existing at 10.19.0.128-10.19.0.254;`, n.ns)}
			},
		},
		{
			name: "a pool overlapping a global pool is rejected",
			existing: func(n names) []client.Object {
				return []client.Object{global("g-"+n.ns, spec(24, "10.21.0.0/24"))}
			},
			pool: func(n names) client.Object { return namespaced(n.ns, "p", spec(24, "10.21.0.10-10.21.0.20")) },
			wantErr: func(n names) []string {
				return []string{`overlaps a GlobalMonolithIPPool at 10.21.0.10-10.21.0.20`}
			},
		},
		{
			name: "a global pool overlapping a namespaced pool is rejected",
			existing: func(n names) []client.Object {
				return []client.Object{namespaced(n.other, "existing", spec(24, "10.22.0.0/24"))}
			},
			pool: func(n names) client.Object { return global("g-"+n.ns, spec(24, "10.22.0.0/28")) },
			wantErr: func(n names) []string {
				return []string{byGlobalWebhook, `overlaps a MonolithIPPool of another namespace at 10.22.0.1-10.22.0.15`}
			},
		},
		{
			name: "an overlap is allowed with the annotation and returned as a warning",
			existing: func(n names) []client.Object {
				return []client.Object{namespaced(n.other, "existing", spec(24, "10.23.0.0/24"))}
			},
			pool: func(n names) client.Object {
				return annotated(namespaced(n.ns, "p", spec(24, "10.23.0.0/24")), v1alpha1.AllowOverlapAnnotation, "true")
			},
			wantWarnings: func(n names) []string {
				return []string{"spec.addresses overlap a MonolithIPPool of another namespace at 10.23.0.1-10.23.0.254, allowed by the annotation ipam.capi-monolith.dev/allow-overlap"}
			},
		},
		{
			name: "an annotation value other than true does not allow an overlap",
			existing: func(n names) []client.Object {
				return []client.Object{namespaced(n.other, "existing", spec(24, "10.24.0.0/24"))}
			},
			pool: func(n names) client.Object {
				return annotated(namespaced(n.ns, "p", spec(24, "10.24.0.5")), v1alpha1.AllowOverlapAnnotation, "yes")
			},
			wantErr: func(n names) []string {
				return []string{`overlaps a MonolithIPPool of another namespace at 10.24.0.5;`}
			},
		},
		{
			name: "adjacent pools are accepted",
			existing: func(n names) []client.Object {
				return []client.Object{namespaced(n.other, "existing", spec(24, "10.25.0.0/25"))}
			},
			pool: func(n names) client.Object { return namespaced(n.ns, "p", spec(24, "10.25.0.128/25")) },
		},
		{
			name: "a pool inside another pool's excluded addresses is accepted",
			existing: func(n names) []client.Object {
				s := spec(24, "10.26.0.0/24")
				s.ExcludedAddresses = []string{"10.26.0.128/25"}
				return []client.Object{global("g-"+n.ns, s)}
			},
			pool: func(n names) client.Object { return namespaced(n.ns, "p", spec(24, "10.26.0.128/25")) },
		},
		{
			name: "a valid IPv6 pool is accepted",
			pool: func(n names) client.Object {
				s := spec(64, "fd00:27::/64")
				s.Gateway = "fd00:27::1"
				s.ExcludedAddresses = []string{"fd00:27::10-fd00:27::20"}
				return global("g-"+n.ns, s)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			n := names{ns: env.Namespace(t, "create"), other: env.Namespace(t, "other")}
			if tt.existing != nil {
				for _, obj := range tt.existing(n) {
					createSeen(t, g, obj)
				}
			}
			c, w := warningClient(t, g)
			obj := tt.pool(n)
			removeAtEnd(t, obj)
			err := c.Create(t.Context(), obj)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want a 422, got %v", err)
				g.Expect(err).To(haveAll(tt.wantErr(n)...))
			}
			if tt.wantWarnings == nil {
				g.Expect(w.Get()).To(BeEmpty())
			} else {
				g.Expect(w.Get()).To(Equal(tt.wantWarnings(n)))
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	type names struct{ ns, other string }
	tests := []struct {
		name string
		pool func(n names) *v1alpha1.MonolithIPPool
		// allocated addresses of the pool (IPAddresses, and allocation
		// records), and other pools created after it.
		allocated    []string
		recorded     []string
		others       func(n names) []client.Object
		mutate       func(p *v1alpha1.MonolithIPPool)
		wantErr      func(n names) []string
		wantWarnings func(n names) []string
	}{
		{
			name:      "a shrink that strands allocated addresses is rejected",
			pool:      func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.30.0.0/24")) },
			allocated: []string{"10.30.0.200", "10.30.0.5", "10.30.0.120"},
			mutate:    func(p *v1alpha1.MonolithIPPool) { p.Spec.Addresses = []string{"10.30.0.100-10.30.0.150"} },
			wantErr: func(names) []string {
				return []string{byMonolithWebhook, `spec: Forbidden: the change leaves 2 allocated IPAddresses outside the pool's allocatable addresses: 10.30.0.5, 10.30.0.200; release them (delete their IPAddressClaims) first`}
			},
		},
		{
			name:      "a new exclusion of an allocated address is rejected",
			pool:      func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.31.0.0/24")) },
			allocated: []string{"10.31.0.5"},
			mutate:    func(p *v1alpha1.MonolithIPPool) { p.Spec.ExcludedAddresses = []string{"10.31.0.0-10.31.0.9"} },
			wantErr: func(names) []string {
				return []string{`the change leaves 1 allocated IPAddress outside the pool's allocatable addresses: 10.31.0.5;`}
			},
		},
		{
			name:      "a gateway moved onto an allocated address is rejected",
			pool:      func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.32.0.0/24")) },
			allocated: []string{"10.32.0.7"},
			mutate:    func(p *v1alpha1.MonolithIPPool) { p.Spec.Gateway = "10.32.0.7" },
			wantErr: func(names) []string {
				return []string{`leaves 1 allocated IPAddress outside the pool's allocatable addresses: 10.32.0.7;`}
			},
		},
		{
			name: "a shrink stranding many addresses lists the first ten and counts the rest",
			pool: func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.33.0.0/24")) },
			allocated: []string{
				"10.33.0.1", "10.33.0.2", "10.33.0.3", "10.33.0.4", "10.33.0.5", "10.33.0.6",
				"10.33.0.7", "10.33.0.8", "10.33.0.9", "10.33.0.10", "10.33.0.11", "10.33.0.12",
			},
			mutate: func(p *v1alpha1.MonolithIPPool) { p.Spec.Addresses = []string{"10.33.0.100/30"} },
			wantErr: func(names) []string {
				return []string{`leaves 12 allocated IPAddresses outside the pool's allocatable addresses: ` +
					`10.33.0.1, 10.33.0.2, 10.33.0.3, 10.33.0.4, 10.33.0.5, 10.33.0.6, 10.33.0.7, 10.33.0.8, 10.33.0.9, 10.33.0.10 and 2 more addresses;`}
			},
		},
		{
			name:      "an update that keeps every allocated address is accepted",
			pool:      func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.34.0.0/24")) },
			allocated: []string{"10.34.0.5", "10.34.0.200"},
			mutate: func(p *v1alpha1.MonolithIPPool) {
				p.Spec.Addresses = []string{"10.34.0.1-10.34.0.210"}
				p.Spec.ExcludedAddresses = []string{"10.34.0.100"}
				p.Spec.Gateway = "10.34.0.254"
			},
		},
		{
			name: "a change of address family is rejected",
			pool: func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.35.0.0/24")) },
			mutate: func(p *v1alpha1.MonolithIPPool) {
				p.Spec.Addresses = []string{"fd00:35::/64"}
				p.Spec.Prefix = 64
			},
			wantErr: func(names) []string {
				return []string{`spec.addresses: Forbidden: the address family cannot change from IPv4 to IPv6; create a new pool instead`}
			},
		},
		{
			name:   "an update into an invalid spec is rejected",
			pool:   func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.36.0.0/24")) },
			mutate: func(p *v1alpha1.MonolithIPPool) { p.Spec.Prefix = 40 },
			wantErr: func(names) []string {
				return []string{`spec.prefix: Invalid value: 40: prefix out of range: 40 is not between 0 and 32 for IPv4`}
			},
		},
		{
			name: "an update growing into another pool is rejected",
			pool: func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(16, "10.37.0.0/24")) },
			others: func(n names) []client.Object {
				return []client.Object{namespaced(n.other, "existing", spec(16, "10.37.1.0/24"))}
			},
			mutate: func(p *v1alpha1.MonolithIPPool) { p.Spec.Addresses = []string{"10.37.0.0/23"} },
			wantErr: func(n names) []string {
				return []string{fmt.Sprintf(`spec.addresses: Forbidden: overlaps a MonolithIPPool of another namespace at 10.37.1.0/24; %s`, allowOverlapHint)}
			},
		},
		{
			name: "an overlap that predates the update is kept with a warning",
			pool: func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.38.0.0/24")) },
			// The other pool allowed the overlap when it was created.
			others: func(n names) []client.Object {
				return []client.Object{annotated(namespaced(n.other, "existing", spec(24, "10.38.0.0/25")), v1alpha1.AllowOverlapAnnotation, "true")}
			},
			mutate: func(p *v1alpha1.MonolithIPPool) { p.Spec.ExcludedAddresses = []string{"10.38.0.100"} },
			wantWarnings: func(n names) []string {
				return []string{"spec.addresses overlap a MonolithIPPool of another namespace at 10.38.0.1-10.38.0.99, 10.38.0.101-10.38.0.127; the overlap predates this change and is kept"}
			},
		},
		{
			name: "removing the allow-overlap annotation from an overlapping pool is rejected",
			pool: func(n names) *v1alpha1.MonolithIPPool {
				return annotated(namespaced(n.ns, "p", spec(24, "10.39.0.0/24")), v1alpha1.AllowOverlapAnnotation, "true")
			},
			others: func(n names) []client.Object {
				return []client.Object{annotated(global("g-"+n.ns, spec(24, "10.39.0.64/26")), v1alpha1.AllowOverlapAnnotation, "true")}
			},
			mutate: func(p *v1alpha1.MonolithIPPool) { delete(p.Annotations, v1alpha1.AllowOverlapAnnotation) },
			wantErr: func(n names) []string {
				return []string{`spec.addresses: Forbidden: overlaps a GlobalMonolithIPPool at 10.39.0.64/26;`}
			},
		},
		{
			name: "an address already outside the pool does not block an update",
			pool: func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.40.0.0/24")) },
			// Stored by hand (or before the pool shrank without the webhook).
			allocated: []string{"10.40.0.5", "10.40.0.255"},
			mutate:    func(p *v1alpha1.MonolithIPPool) { p.Spec.ExcludedAddresses = []string{"10.40.0.200"} },
		},
		{
			name:     "setting allow-overlap on a pool with allocation records is rejected",
			pool:     func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.42.0.0/24")) },
			recorded: []string{"10.42.0.5"},
			mutate:   func(p *v1alpha1.MonolithIPPool) { annotated(p, v1alpha1.AllowOverlapAnnotation, "true") },
			wantErr: func(names) []string {
				return []string{`metadata.annotations[ipam.capi-monolith.dev/allow-overlap]: Forbidden: cannot change while 1 IPAddress is allocated from the pool`}
			},
		},
		{
			name: "removing allow-overlap from a pool with allocation records is rejected",
			pool: func(n names) *v1alpha1.MonolithIPPool {
				return annotated(namespaced(n.ns, "p", spec(24, "10.43.0.0/24")), v1alpha1.AllowOverlapAnnotation, "true")
			},
			recorded: []string{"10.43.0.5", "10.43.0.6"},
			mutate:   func(p *v1alpha1.MonolithIPPool) { delete(p.Annotations, v1alpha1.AllowOverlapAnnotation) },
			wantErr: func(names) []string {
				return []string{`Forbidden: cannot change while 2 IPAddresses are allocated from the pool`}
			},
		},
		{
			name:   "setting allow-overlap on a pool without allocation records is accepted",
			pool:   func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.44.0.0/24")) },
			mutate: func(p *v1alpha1.MonolithIPPool) { annotated(p, v1alpha1.AllowOverlapAnnotation, "true") },
		},
		{
			name:      "a metadata-only update of a pool with allocated addresses is accepted",
			pool:      func(n names) *v1alpha1.MonolithIPPool { return namespaced(n.ns, "p", spec(24, "10.41.0.0/24")) },
			allocated: []string{"10.41.0.5"},
			mutate: func(p *v1alpha1.MonolithIPPool) {
				p.Labels = map[string]string{"team": "a"}
				p.Finalizers = []string{v1alpha1.ProtectPoolFinalizer}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			n := names{ns: env.Namespace(t, "update"), other: env.Namespace(t, "other")}
			pool := tt.pool(n)
			createSeen(t, g, pool)
			if len(tt.allocated) > 0 {
				allocate(t, g, n.ns, pool, tt.allocated...)
			}
			if len(tt.recorded) > 0 {
				record(t, g, pool, tt.recorded...)
			}
			if tt.others != nil {
				for _, obj := range tt.others(n) {
					createSeen(t, g, obj)
				}
			}

			c, w := warningClient(t, g)
			g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(pool), pool)).To(Succeed())
			tt.mutate(pool)
			err := c.Update(t.Context(), pool)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want a 422, got %v", err)
				g.Expect(err).To(haveAll(tt.wantErr(n)...))
			}
			if tt.wantWarnings == nil {
				g.Expect(w.Get()).To(BeEmpty())
			} else {
				g.Expect(w.Get()).To(Equal(tt.wantWarnings(n)))
			}
		})
	}
}

func TestDelete(t *testing.T) {
	tests := []struct {
		name      string
		pool      func(ns string) v1alpha1.Pool
		allocated []string
		wantErr   []string
	}{
		{
			name:      "deleting a pool with an allocated address is rejected",
			pool:      func(ns string) v1alpha1.Pool { return namespaced(ns, "p", spec(24, "10.50.0.0/24")) },
			allocated: []string{"10.50.0.5"},
			wantErr: []string{
				byMonolithWebhook,
				`monolithippools.ipam.cluster.x-k8s.io "p" is forbidden: 1 IPAddress is still allocated from this MonolithIPPool; ` +
					`delete their IPAddressClaims first, or set the annotation ipam.capi-monolith.dev/skip-delete-protection: "true" to delete it anyway`,
			},
		},
		{
			name:      "deleting a global pool with allocated addresses is rejected",
			pool:      func(ns string) v1alpha1.Pool { return global("g-"+ns, spec(24, "10.51.0.0/24")) },
			allocated: []string{"10.51.0.5", "10.51.0.6"},
			wantErr: []string{
				byGlobalWebhook,
				`2 IPAddresses are still allocated from this GlobalMonolithIPPool;`,
				`ipam.capi-monolith.dev/skip-delete-protection: "true"`,
			},
		},
		{
			name: "deleting a pool with allocated addresses and the skip-delete-protection annotation is allowed",
			pool: func(ns string) v1alpha1.Pool {
				return annotated(namespaced(ns, "p", spec(24, "10.52.0.0/24")), v1alpha1.SkipDeleteProtectionAnnotation, "true")
			},
			allocated: []string{"10.52.0.5"},
		},
		{
			name: "deleting a pool with allocated addresses that clusterctl move is deleting from the source is allowed",
			pool: func(ns string) v1alpha1.Pool {
				return annotated(namespaced(ns, "p", spec(24, "10.55.0.0/24")), v1alpha1.ClusterctlDeleteForMoveAnnotation, "")
			},
			allocated: []string{"10.55.0.5"},
		},
		{
			name: "deleting an empty pool is allowed",
			pool: func(ns string) v1alpha1.Pool { return namespaced(ns, "p", spec(24, "10.53.0.0/24")) },
		},
		{
			name: "deleting an empty global pool is allowed",
			pool: func(ns string) v1alpha1.Pool { return global("g-"+ns, spec(64, "fd00:54::/64")) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := env.Namespace(t, "delete")
			pool := tt.pool(ns)
			createSeen(t, g, pool)
			if len(tt.allocated) > 0 {
				allocate(t, g, ns, pool, tt.allocated...)
			}

			err := env.Client.Delete(t.Context(), pool)
			if tt.wantErr != nil {
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want a 403, got %v", err)
				g.Expect(err).To(haveAll(tt.wantErr...))
				g.Expect(env.Client.Get(t.Context(), client.ObjectKeyFromObject(pool), pool)).To(Succeed(), "the pool is kept")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			err = env.Client.Get(t.Context(), client.ObjectKeyFromObject(pool), pool)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the pool is gone, got %v", err)
		})
	}
}
