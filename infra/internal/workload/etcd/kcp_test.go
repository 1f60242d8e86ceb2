package etcd_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	kcpetcd "sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/etcd"
	etcdutil "sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/etcd/util"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/proxy"
)

// TestKubeadmControlPlanesEtcdClient drives the fake etcd with Cluster
// API's own etcd client and port-forward dialer (KubeadmControlPlane
// v1.14's pkg/etcd and pkg/proxy), as KCP checks etcd health and scales a
// control plane down: members, leader and alarms; the leadership moved off
// the machine going away; its member removed by another.
func TestKubeadmControlPlanesEtcdClient(t *testing.T) {
	g := NewWithT(t)
	w := startWorkload(t)
	ctx := callCtx(t)
	newClient := func(pod string, timeout ...time.Duration) (*kcpetcd.Client, error) {
		timeout = append(timeout, 10*time.Second)
		c, err := kcpetcd.NewClient(ctx, kcpetcd.ClientConfiguration{
			Endpoint: pod,
			Proxy: proxy.Proxy{
				Kind: "pods", Namespace: "kube-system", Port: 2379,
				KubeConfig: rest.CopyConfig(w.cfg),
			},
			TLSConfig:   kcpTLS(t, w.etcdCA, w.etcdCA),
			DialTimeout: timeout[0],
			CallTimeout: timeout[0],
			Logger:      zap.NewNop(),
		})
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
		}
		return c, err
	}

	// The health check, from any member.
	c2, err := newClient("etcd-cp-2")
	g.Expect(err).NotTo(HaveOccurred())
	members, err := c2.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(etcdutil.MemberNames(members)).To(ConsistOf("cp-0", "cp-1", "cp-2"))
	leader := etcdutil.MemberForName(members, "cp-0")
	g.Expect(leader).NotTo(BeNil())
	g.Expect(c2.LeaderID).To(Equal(leader.ID))
	alarms, err := c2.Alarms(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(alarms).To(BeEmpty())

	// ForwardEtcdLeadership: on the leader's own member.
	c0, err := newClient("etcd-cp-0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c0.LeaderID).To(Equal(leader.ID))
	g.Expect(c0.MoveLeader(ctx, etcdutil.MemberForName(members, "cp-1").ID)).To(Succeed())

	// RemoveEtcdMember: through a member that stays.
	c1, err := newClient("etcd-cp-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c1.LeaderID).To(Equal(etcdutil.MemberForName(members, "cp-1").ID))
	g.Expect(c1.RemoveMember(ctx, leader.ID)).To(Succeed())
	after, err := c1.Members(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(etcdutil.MemberNames(after)).To(ConsistOf("cp-1", "cp-2"))

	// The removed member's pod is still there, but no client reaches it
	// (the client tries until its timeout).
	_, err = newClient("etcd-cp-0", 2*time.Second)
	g.Expect(err).To(HaveOccurred())
}
