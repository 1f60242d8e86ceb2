package etcd

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// What Status reports of the (absent) database.
const (
	dbSize         = 20 << 20
	dbSizeInUse    = 12 << 20
	dbSizeQuota    = 2 << 30 // etcd's default --quota-backend-bytes
	storageVersion = "3.6.0"
)

func (s *Server) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	pod := ""
	if p, ok := peer.FromContext(ctx); ok {
		if a, ok := p.LocalAddr.(memberAddr); ok {
			pod = a.pod
		}
	}
	log := s.opts.Log.WithValues("method", info.FullMethod, "pod", pod)
	log.V(4).Info("Serving an etcd call")
	resp, err := handler(ctx, req)
	if err != nil && status.Code(err) != codes.Unimplemented {
		log.Info("An etcd call failed", "err", err)
	}
	return resp, err
}

// answering reads the cluster and finds the member the call reached (the
// one of the pod the connection was dialled to). A member that is no
// longer there answers as a stopped etcd server.
func (s *Server) answering(ctx context.Context) (*view, *member, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, nil, status.Error(codes.Internal, "the call has no connection")
	}
	addr, ok := p.LocalAddr.(memberAddr)
	if !ok {
		return nil, nil, status.Error(codes.Internal, "the connection was not made by Dial")
	}
	v, err := readView(s.opts.Store)
	if err != nil {
		return nil, nil, status.Error(codes.Internal, err.Error())
	}
	m, ok := v.byPod[addr.pod]
	if !ok || m.removed {
		return nil, nil, rpctypes.ErrGRPCStopped
	}
	return v, m, nil
}

func (s *Server) header(v *view, self *member) *etcdserverpb.ResponseHeader {
	return &etcdserverpb.ResponseHeader{
		ClusterId: s.clusterID,
		MemberId:  self.id,
		Revision:  int64(v.revision),
		RaftTerm:  v.term,
	}
}

func pbMembers(members []*member) []*etcdserverpb.Member {
	out := make([]*etcdserverpb.Member, 0, len(members))
	for _, m := range members {
		out = append(out, &etcdserverpb.Member{
			ID:         m.id,
			Name:       m.name,
			PeerURLs:   slices.Clone(m.peerURLs),
			ClientURLs: slices.Clone(m.clientURLs),
		})
	}
	return out
}

// clusterServer answers the Cluster service: list and remove; adding,
// updating and promoting members are Unimplemented (kubeadm joins members
// by creating their pods).
type clusterServer struct {
	etcdserverpb.UnimplementedClusterServer
	s *Server
}

func (c *clusterServer) MemberList(ctx context.Context, _ *etcdserverpb.MemberListRequest) (*etcdserverpb.MemberListResponse, error) {
	v, self, err := c.s.answering(ctx)
	if err != nil {
		return nil, err
	}
	return &etcdserverpb.MemberListResponse{Header: c.s.header(v, self), Members: pbMembers(v.members)}, nil
}

// MemberRemove records the removal on the member's pod, so that the member
// leaves the list while the pod is still there. Like etcd with its strict
// reconfiguration check, it refuses to remove the last member.
func (c *clusterServer) MemberRemove(ctx context.Context, req *etcdserverpb.MemberRemoveRequest) (*etcdserverpb.MemberRemoveResponse, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	v, self, err := c.s.answering(ctx)
	if err != nil {
		return nil, err
	}
	target := v.byID(req.ID)
	if target == nil {
		return nil, rpctypes.ErrGRPCMemberNotFound
	}
	if len(v.members) == 1 {
		return nil, rpctypes.ErrGRPCMemberNotEnoughStarted
	}
	c.s.opts.Log.Info("Removing an etcd member", "member", target.name, "pod", target.pod)
	if err := annotatePod(c.s.opts.Store, target.pod, AnnotationRemoved, "true"); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if target == v.leader {
		// The others elect a leader in the next term.
		next, err := readView(c.s.opts.Store)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := annotatePod(c.s.opts.Store, next.leader.pod, AnnotationLeader, strconv.FormatUint(v.term+1, 10)); err != nil {
			return nil, status.Error(codes.Internal, fmt.Sprintf("the member was removed, but: %v", err))
		}
	}
	// A member that removed itself answers, then stops.
	if v, err = readView(c.s.opts.Store); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &etcdserverpb.MemberRemoveResponse{Header: c.s.header(v, self), Members: pbMembers(v.members)}, nil
}

// maintenanceServer answers the Maintenance service: status, alarms (none
// is ever raised) and leader moves; the rest is Unimplemented.
type maintenanceServer struct {
	etcdserverpb.UnimplementedMaintenanceServer
	s *Server
}

func (m *maintenanceServer) Status(ctx context.Context, _ *etcdserverpb.StatusRequest) (*etcdserverpb.StatusResponse, error) {
	v, self, err := m.s.answering(ctx)
	if err != nil {
		return nil, err
	}
	return &etcdserverpb.StatusResponse{
		Header:           m.s.header(v, self),
		Version:          m.s.opts.Version,
		DbSize:           dbSize,
		DbSizeInUse:      dbSizeInUse,
		DbSizeQuota:      dbSizeQuota,
		Leader:           v.leader.id,
		RaftIndex:        v.revision,
		RaftAppliedIndex: v.revision,
		RaftTerm:         v.term,
		StorageVersion:   storageVersion,
	}, nil
}

func (m *maintenanceServer) Alarm(ctx context.Context, req *etcdserverpb.AlarmRequest) (*etcdserverpb.AlarmResponse, error) {
	v, self, err := m.s.answering(ctx)
	if err != nil {
		return nil, err
	}
	if req.Action == etcdserverpb.AlarmRequest_ACTIVATE {
		return nil, status.Error(codes.Unimplemented, "this etcd raises no alarms")
	}
	// Listing, or deactivating what was never raised.
	return &etcdserverpb.AlarmResponse{Header: m.s.header(v, self)}, nil
}

// MoveLeader makes the transferee the leader in the next term. As in etcd,
// only the leader can hand its leadership over, and only to a member.
func (m *maintenanceServer) MoveLeader(ctx context.Context, req *etcdserverpb.MoveLeaderRequest) (*etcdserverpb.MoveLeaderResponse, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	v, self, err := m.s.answering(ctx)
	if err != nil {
		return nil, err
	}
	if v.leader != self {
		return nil, rpctypes.ErrGRPCNotLeader
	}
	target := v.byID(req.TargetID)
	if target == nil {
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	}
	if target != self {
		m.s.opts.Log.Info("Moving the etcd leader", "from", self.name, "to", target.name, "term", v.term+1)
		// The new leader first: readers take the highest term, so the state
		// is consistent after each write.
		if err := annotatePod(m.s.opts.Store, target.pod, AnnotationLeader, strconv.FormatUint(v.term+1, 10)); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if self.leaderTerm > 0 {
			if err := annotatePod(m.s.opts.Store, self.pod, AnnotationLeader, ""); err != nil {
				return nil, status.Error(codes.Internal, fmt.Sprintf("the leader moved, but: %v", err))
			}
		}
		if v, err = readView(m.s.opts.Store); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &etcdserverpb.MoveLeaderResponse{Header: m.s.header(v, self)}, nil
}
