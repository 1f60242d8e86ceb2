package etcd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/etcd"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// threeMembers is a store with the etcd pods of three control plane nodes
// (and a pod that is not etcd's), and its etcd CA.
func threeMembers(t *testing.T) (*store.Store, *testCA) {
	s := store.New(store.Options{})
	addEtcdPod(t, s, "cp-0", "10.0.0.10")
	addEtcdPod(t, s, "cp-1", "10.0.0.11")
	addEtcdPod(t, s, "cp-2", "10.0.0.12")
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "kube-apiserver-cp-0", "namespace": "kube-system", "labels": map[string]any{"component": "kube-apiserver"}},
		"spec":     map[string]any{"nodeName": "cp-0"},
	}}
	if _, err := s.Create(podsResource, other); err != nil {
		t.Fatal(err)
	}
	return s, newCA(t, "etcd-ca")
}

func memberNames(members []*etcdserverpb.Member) []string {
	var names []string
	for _, m := range members {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names
}

func TestMembersAreTheEtcdPods(t *testing.T) {
	g := NewWithT(t)
	s, ca := threeMembers(t)
	srv := startEtcd(t, s, ca)
	ctx := callCtx(t)

	c := etcdClient(t, "etcd-cp-1", kcpTLS(t, ca, ca), direct(srv))
	list, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(memberNames(list.Members)).To(Equal([]string{"cp-0", "cp-1", "cp-2"}))
	ids := map[uint64]bool{}
	for _, m := range list.Members {
		g.Expect(m.ID).NotTo(BeZero())
		ids[m.ID] = true
		ip := map[string]string{"cp-0": "10.0.0.10", "cp-1": "10.0.0.11", "cp-2": "10.0.0.12"}[m.Name]
		g.Expect(m.PeerURLs).To(Equal([]string{"https://" + ip + ":2380"}))
		g.Expect(m.ClientURLs).To(Equal([]string{"https://" + ip + ":2379"}))
		g.Expect(m.IsLearner).To(BeFalse())
	}
	g.Expect(ids).To(HaveLen(3), "distinct IDs")
	g.Expect(list.Header.ClusterId).NotTo(BeZero())

	// A server rebuilt on the same store (a restart) answers the same.
	srv.Close()
	rebuilt := startEtcd(t, s, ca)
	again, err := etcdClient(t, "etcd-cp-2", kcpTLS(t, ca, ca), direct(rebuilt)).MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Members).To(Equal(list.Members))
	g.Expect(again.Header.ClusterId).To(Equal(list.Header.ClusterId))
}

func TestAMemberWithoutAPodIPTakesItsNodesInternalIP(t *testing.T) {
	g := NewWithT(t)
	s, ca := store.New(store.Options{}), newCA(t, "etcd-ca")
	addEtcdPod(t, s, "cp-0", "")
	node := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "cp-0"},
		"status": map[string]any{"addresses": []any{
			map[string]any{"type": "Hostname", "address": "cp-0"},
			map[string]any{"type": "InternalIP", "address": "10.0.0.20"},
		}},
	}}
	_, err := s.Create(store.Resource{Resource: "nodes"}, node)
	g.Expect(err).NotTo(HaveOccurred())
	srv := startEtcd(t, s, ca)
	list, err := etcdClient(t, "etcd-cp-0", kcpTLS(t, ca, ca), direct(srv)).MemberList(callCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Members).To(HaveLen(1))
	g.Expect(list.Members[0].ClientURLs).To(Equal([]string{"https://10.0.0.20:2379"}))
}

func TestStatusAnswersAsTheDialledMember(t *testing.T) {
	g := NewWithT(t)
	s, ca := threeMembers(t)
	srv := startEtcd(t, s, ca)
	ctx := callCtx(t)

	ids := map[string]uint64{}
	list, err := etcdClient(t, "etcd-cp-0", kcpTLS(t, ca, ca), direct(srv)).MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range list.Members {
		ids[m.Name] = m.ID
	}
	for _, node := range []string{"cp-0", "cp-1", "cp-2"} {
		c := etcdClient(t, "etcd-"+node, kcpTLS(t, ca, ca), direct(srv))
		st, err := c.Status(ctx, c.Endpoints()[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Header.MemberId).To(Equal(ids[node]), "answered by %s", node)
		// The pods were created in the same second: the first by name leads.
		g.Expect(st.Leader).To(Equal(ids["cp-0"]))
		g.Expect(st.RaftTerm).To(BeEquivalentTo(2))
		g.Expect(st.Version).To(Equal(etcd.DefaultVersion))
		g.Expect(st.Errors).To(BeEmpty())
		g.Expect(st.IsLearner).To(BeFalse())
	}
}

func TestTheServingCertificateIsTheMembersSignedByTheEtcdCA(t *testing.T) {
	g := NewWithT(t)
	s, ca := threeMembers(t)
	srv := startEtcd(t, s, ca)
	ctx := callCtx(t)

	// A client that checks host names reaches the member by node name or IP.
	for _, name := range []string{"cp-1", "10.0.0.11", "localhost", "127.0.0.1"} {
		cfg := &tls.Config{RootCAs: ca.pool(), ServerName: name, Certificates: []tls.Certificate{ca.clientCert(t, "etcdctl")}}
		raw, err := srv.Dial(ctx, "etcd-cp-1")
		g.Expect(err).NotTo(HaveOccurred())
		conn := tls.Client(raw, cfg)
		g.Expect(conn.HandshakeContext(ctx)).To(Succeed(), name)
		leaf := conn.ConnectionState().PeerCertificates[0]
		g.Expect(leaf.Subject.CommonName).To(Equal("cp-1"))
		// (Closing the TLS connection would wait for the server to read its
		// close_notify: the pipe is synchronous and the server is writing.)
		_ = raw.Close()
	}
}

func TestAClientCertificateFromAnotherCAIsRefused(t *testing.T) {
	g := NewWithT(t)
	s, ca := threeMembers(t)
	srv := startEtcd(t, s, ca)
	ctx := callCtx(t)

	for name, cfg := range map[string]*tls.Config{
		"another CA's client certificate": kcpTLS(t, ca, newCA(t, "another-etcd-ca")),
		"no client certificate":           {InsecureSkipVerify: true}, //nolint:gosec // testing the server
	} {
		raw, err := srv.Dial(ctx, "etcd-cp-0")
		g.Expect(err).NotTo(HaveOccurred())
		conn := tls.Client(raw, cfg)
		// TLS 1.3 clients finish their handshake before the server checks
		// their certificate: the refusal arrives on the first read.
		err = conn.HandshakeContext(ctx)
		if err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = conn.Read(make([]byte, 1))
		}
		g.Expect(err).To(MatchError(ContainSubstring("certificate")), name)
		_ = conn.Close()
	}

	// The etcd client gets no answer either.
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{"etcd-cp-0"}, DialTimeout: time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(direct(srv))},
		TLS:         kcpTLS(t, ca, newCA(t, "another-etcd-ca")), Logger: zap.NewNop(),
	})
	if err == nil {
		defer c.Close()
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err = c.MemberList(short)
	}
	g.Expect(err).To(HaveOccurred())
}

func TestMoveLeaderHandsLeadershipOverFromTheLeader(t *testing.T) {
	g := NewWithT(t)
	s, ca := threeMembers(t)
	srv := startEtcd(t, s, ca)
	ctx := callCtx(t)
	ids := idsByName(t, srv, ca)

	follower := etcdClient(t, "etcd-cp-1", kcpTLS(t, ca, ca), direct(srv))
	_, err := follower.MoveLeader(ctx, ids["cp-2"])
	g.Expect(err).To(MatchError(rpctypes.ErrNotLeader), "only the leader hands over")

	leader := etcdClient(t, "etcd-cp-0", kcpTLS(t, ca, ca), direct(srv))
	_, err = leader.MoveLeader(ctx, 12345)
	g.Expect(err).To(MatchError(rpctypes.ErrBadLeaderTransferee))

	_, err = leader.MoveLeader(ctx, ids["cp-1"])
	g.Expect(err).NotTo(HaveOccurred())
	for _, node := range []string{"cp-0", "cp-1", "cp-2"} {
		c := etcdClient(t, "etcd-"+node, kcpTLS(t, ca, ca), direct(srv))
		st, err := c.Status(ctx, c.Endpoints()[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Leader).To(Equal(ids["cp-1"]), "as %s sees it", node)
		g.Expect(st.RaftTerm).To(BeEquivalentTo(3))
	}

	// The new leader hands over in turn; the state survives a rebuild.
	_, err = follower.MoveLeader(ctx, ids["cp-2"])
	g.Expect(err).NotTo(HaveOccurred())
	srv.Close()
	rebuilt := startEtcd(t, s, ca)
	c := etcdClient(t, "etcd-cp-0", kcpTLS(t, ca, ca), direct(rebuilt))
	st, err := c.Status(ctx, c.Endpoints()[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Leader).To(Equal(ids["cp-2"]))
	g.Expect(st.RaftTerm).To(BeEquivalentTo(4))
}

func TestMemberRemoveTakesTheMemberOutWhileItsPodStays(t *testing.T) {
	g := NewWithT(t)
	s, ca := threeMembers(t)
	srv := startEtcd(t, s, ca)
	ctx := callCtx(t)
	ids := idsByName(t, srv, ca)

	c := etcdClient(t, "etcd-cp-0", kcpTLS(t, ca, ca), direct(srv))
	_, err := c.MemberRemove(ctx, 12345)
	g.Expect(err).To(MatchError(rpctypes.ErrMemberNotFound))

	resp, err := c.MemberRemove(ctx, ids["cp-2"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(memberNames(resp.Members)).To(Equal([]string{"cp-0", "cp-1"}))
	list, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(memberNames(list.Members)).To(Equal([]string{"cp-0", "cp-1"}))
	pod, err := s.Get(podsResource, "kube-system", "etcd-cp-2")
	g.Expect(err).NotTo(HaveOccurred(), "the pod stays")
	g.Expect(pod.GetAnnotations()).To(HaveKeyWithValue(etcd.AnnotationRemoved, "true"))

	// The removed member's pod no longer answers.
	_, err = srv.Dial(ctx, "etcd-cp-2")
	g.Expect(err).To(MatchError(etcd.ErrNoMember))
	_, err = srv.Dial(ctx, "etcd-cp-9")
	g.Expect(err).To(MatchError(etcd.ErrNoMember))

	// Removing the leader elects another; the last member stays.
	_, err = c.MemberRemove(ctx, ids["cp-0"])
	g.Expect(err).NotTo(HaveOccurred())
	c1 := etcdClient(t, "etcd-cp-1", kcpTLS(t, ca, ca), direct(srv))
	st, err := c1.Status(ctx, c1.Endpoints()[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Leader).To(Equal(ids["cp-1"]))
	g.Expect(st.RaftTerm).To(BeEquivalentTo(3), "a new election")
	_, err = c1.MemberRemove(ctx, ids["cp-1"])
	g.Expect(err).To(MatchError(rpctypes.ErrMemberNotEnoughStarted))

	// A connection to a member that was removed answers as a stopped server.
	_, err = c.MemberList(ctx)
	g.Expect(status.Code(unwrapRPC(err))).To(Equal(codes.Unavailable))
}

func TestAlarmListIsEmpty(t *testing.T) {
	g := NewWithT(t)
	s, ca := threeMembers(t)
	srv := startEtcd(t, s, ca)
	resp, err := etcdClient(t, "etcd-cp-2", kcpTLS(t, ca, ca), direct(srv)).AlarmList(callCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Alarms).To(BeEmpty())
}

func TestOtherRPCsAreUnimplemented(t *testing.T) {
	g := NewWithT(t)
	s, ca := threeMembers(t)
	srv := startEtcd(t, s, ca)
	ctx := callCtx(t)
	c := etcdClient(t, "etcd-cp-0", kcpTLS(t, ca, ca), direct(srv))

	_, err := c.Get(ctx, "/registry/pods")
	g.Expect(status.Code(unwrapRPC(err))).To(Equal(codes.Unimplemented), "KV")
	_, err = c.MemberAdd(ctx, []string{"https://10.0.0.13:2380"})
	g.Expect(status.Code(unwrapRPC(err))).To(Equal(codes.Unimplemented), "MemberAdd")
	_, err = c.Defragment(ctx, c.Endpoints()[0])
	g.Expect(status.Code(unwrapRPC(err))).To(Equal(codes.Unimplemented), "Defragment")
}

func TestAClosedServerRefusesToDial(t *testing.T) {
	g := NewWithT(t)
	s, ca := threeMembers(t)
	srv := startEtcd(t, s, ca)
	srv.Close()
	_, err := srv.Dial(callCtx(t), "etcd-cp-0")
	g.Expect(err).To(MatchError(etcd.ErrClosed))
}

func idsByName(t *testing.T, srv *etcd.Server, ca *testCA) map[string]uint64 {
	t.Helper()
	list, err := etcdClient(t, "etcd-cp-0", kcpTLS(t, ca, ca), direct(srv)).MemberList(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]uint64{}
	for _, m := range list.Members {
		ids[m.Name] = m.ID
	}
	return ids
}

// unwrapRPC returns the gRPC status error the etcd client wrapped.
func unwrapRPC(err error) error {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return status.Error(ee.Code(), ee.Error())
	}
	return err
}
