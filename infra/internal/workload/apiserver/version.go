package apiserver

import (
	"net/http"
	"runtime"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

// controlPlaneLabel marks the Nodes of control plane machines, as kubeadm
// labels them.
const controlPlaneLabel = "node-role.kubernetes.io/control-plane"

var nodes = store.Resource{Resource: "nodes"}

// versionInfo is /version's answer for a kube-apiserver of gitVersion.
func versionInfo(gitVersion string) apimachineryversion.Info {
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(gitVersion, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	return apimachineryversion.Info{
		Major: major, Minor: minor, GitVersion: gitVersion,
		GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// versionOf is the version of the cluster's API server: the oldest kubelet
// version of its control plane Nodes, the version every kube-apiserver of
// the cluster has reached during a rolling upgrade (as kubeadm runs the
// kube-apiserver of the node's version). A cluster with no control plane
// Node yet reports Options.KubernetesVersion.
func (h *Handler) versionOf(r *http.Request) apimachineryversion.Info {
	s, err := h.opts.StoreFor(r)
	if err != nil {
		return h.version
	}
	list, _, err := s.List(nodes, "", store.ListOptions{LabelSelector: controlPlaneNodes})
	if err != nil {
		return h.version
	}
	var oldest *version.Version
	var oldestRaw string
	for _, n := range list {
		raw, _, _ := unstructured.NestedString(n.Object, "status", "nodeInfo", "kubeletVersion")
		v, err := version.ParseSemantic(raw)
		if err != nil {
			continue
		}
		if oldest == nil || v.LessThan(oldest) {
			oldest, oldestRaw = v, raw
		}
	}
	if oldest == nil {
		return h.version
	}
	return versionInfo(oldestRaw)
}

// controlPlaneNodes selects the Nodes with the control plane label.
var controlPlaneNodes = func() labels.Selector {
	r, err := labels.NewRequirement(controlPlaneLabel, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*r)
}()
