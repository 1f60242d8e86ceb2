package etcd

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// What marks etcd pods and records member changes on them.
const (
	// ComponentLabel and ComponentValue select the etcd pods, as kubeadm
	// labels its etcd static pods.
	ComponentLabel = "component"
	ComponentValue = "etcd"
	// PodPrefix starts the name of an etcd pod: etcd-<node>.
	PodPrefix = "etcd-"
	// AnnotationRemoved on an etcd pod says MemberRemove removed its member:
	// the member is no longer listed and its pod no longer answers.
	AnnotationRemoved = "etcd.workload.capi-monolith.dev/member-removed"
	// AnnotationLeader on an etcd pod says its member became the leader in
	// the raft term the value holds (a decimal number).
	AnnotationLeader = "etcd.workload.capi-monolith.dev/leader-term"
	// AnnotationAdvertiseClientURLs is kubeadm's annotation of the client
	// URL on an etcd pod; when set it is the member's client URL.
	AnnotationAdvertiseClientURLs = "kubeadm.kubernetes.io/etcd.advertise-client-urls"

	// ClientPort is the port of a member's client URL, the one
	// KubeadmControlPlane port-forwards to; PeerPort its peer URL's.
	ClientPort = 2379
	PeerPort   = 2380
	// firstTerm is the raft term of a cluster's first leader: etcd's first
	// election ends in term 2.
	firstTerm = 2
)

var (
	podsResource  = store.Resource{Resource: "pods", Namespaced: true}
	nodesResource = store.Resource{Resource: "nodes"}
)

// member is one etcd member, as its pod shows it.
type member struct {
	id         uint64
	name       string // the node's name
	pod        string
	ip         string
	clientURLs []string
	peerURLs   []string
	created    time.Time
	removed    bool
	leaderTerm uint64 // 0 unless the pod carries AnnotationLeader
}

// view is the etcd cluster as the store shows it at one moment.
type view struct {
	byPod map[string]*member
	// members are the members not removed, by ID, as etcd lists them.
	members  []*member
	leader   *member
	term     uint64
	revision uint64
}

// MemberID is the ID of the etcd member on the node: stable (a hash of the
// node's name) and nonzero.
func MemberID(node string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(node))
	if id := h.Sum64(); id != 0 {
		return id
	}
	return 1
}

// readView reads the etcd pods (and their nodes' addresses) from the store.
func readView(s *store.Store) (*view, error) {
	pods, rv, err := s.List(podsResource, metav1.NamespaceSystem, store.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{ComponentLabel: ComponentValue}),
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list the etcd pods: %w", err)
	}
	v := &view{byPod: map[string]*member{}}
	if v.revision, err = strconv.ParseUint(rv, 10, 64); err != nil {
		return nil, fmt.Errorf("failed to read the store's resourceVersion %q: %w", rv, err)
	}
	var maxTerm uint64
	for _, pod := range pods {
		m, err := memberOf(s, pod)
		if err != nil {
			return nil, err
		}
		v.byPod[m.pod] = m
		maxTerm = max(maxTerm, m.leaderTerm)
		if !m.removed {
			v.members = append(v.members, m)
		}
	}
	slices.SortFunc(v.members, func(a, b *member) int { return cmp.Compare(a.id, b.id) })

	// The leader is the member that became it last; without one (a new
	// cluster, or the leader was removed) the oldest member wins the
	// election, as a kubeadm cluster's first control plane does.
	for _, m := range v.members {
		if m.leaderTerm > 0 && (v.leader == nil || m.leaderTerm > v.leader.leaderTerm) {
			v.leader = m
		}
	}
	if v.leader != nil {
		v.term = v.leader.leaderTerm
	} else if len(v.members) > 0 {
		v.leader = slices.MinFunc(v.members, func(a, b *member) int {
			if c := a.created.Compare(b.created); c != 0 {
				return c
			}
			return cmp.Compare(a.name, b.name)
		})
		v.term = max(firstTerm, maxTerm+1)
	}
	return v, nil
}

func memberOf(s *store.Store, pod *unstructured.Unstructured) (*member, error) {
	node, _, _ := unstructured.NestedString(pod.Object, "spec", "nodeName")
	if node == "" {
		node = strings.TrimPrefix(pod.GetName(), PodPrefix)
	}
	m := &member{
		id:      MemberID(node),
		name:    node,
		pod:     pod.GetName(),
		created: pod.GetCreationTimestamp().Time,
	}
	ann := pod.GetAnnotations()
	m.removed = ann[AnnotationRemoved] != ""
	if t, err := strconv.ParseUint(ann[AnnotationLeader], 10, 64); err == nil {
		m.leaderTerm = t
	}
	m.ip, _, _ = unstructured.NestedString(pod.Object, "status", "podIP")
	if m.ip == "" {
		ip, err := nodeInternalIP(s, node)
		if err != nil {
			return nil, err
		}
		m.ip = ip
	}
	if m.ip != "" {
		m.peerURLs = []string{"https://" + net.JoinHostPort(m.ip, strconv.Itoa(PeerPort))}
		m.clientURLs = []string{"https://" + net.JoinHostPort(m.ip, strconv.Itoa(ClientPort))}
	}
	if urls := ann[AnnotationAdvertiseClientURLs]; urls != "" {
		m.clientURLs = strings.Split(urls, ",")
		if m.ip == "" {
			if u, err := url.Parse(m.clientURLs[0]); err == nil {
				m.ip = u.Hostname()
			}
		}
	}
	return m, nil
}

// nodeInternalIP is the node's InternalIP address, or "" when the node or
// its address is not there (yet).
func nodeInternalIP(s *store.Store, node string) (string, error) {
	n, err := s.Get(nodesResource, "", node)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("failed to get Node %s: %w", node, err)
	}
	addrs, _, _ := unstructured.NestedSlice(n.Object, "status", "addresses")
	for _, a := range addrs {
		if am, ok := a.(map[string]any); ok && am["type"] == "InternalIP" {
			if ip, ok := am["address"].(string); ok {
				return ip, nil
			}
		}
	}
	return "", nil
}

func (v *view) byID(id uint64) *member {
	for _, m := range v.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// annotatePod sets (or, with value "", removes) an annotation on an etcd
// pod; a concurrent write of the pod (a kubelet-like status update) is
// retried on a fresh read.
func annotatePod(s *store.Store, pod, key, value string) error {
	for attempt := 0; ; attempt++ {
		obj, err := s.Get(podsResource, metav1.NamespaceSystem, pod)
		if err != nil {
			return fmt.Errorf("failed to get Pod %s/%s: %w", metav1.NamespaceSystem, pod, err)
		}
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		if value == "" {
			delete(ann, key)
		} else {
			ann[key] = value
		}
		obj.SetAnnotations(ann)
		_, err = s.Update(podsResource, obj)
		if apierrors.IsConflict(err) && attempt < 10 {
			continue
		}
		if err != nil {
			return fmt.Errorf("failed to annotate Pod %s/%s: %w", metav1.NamespaceSystem, pod, err)
		}
		return nil
	}
}
