package main

import (
	"bytes"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSideOrderAlternatesOursFirst(t *testing.T) {
	g := NewWithT(t)
	g.Expect(sideOrder(2)).To(Equal([]Side{SideOurs, SidePeer, SideOurs, SidePeer}))
	g.Expect(sideDevArgs(SideOurs)).To(Equal([]string{"--enable-modules=infra"}))
	g.Expect(sideDevArgs(SidePeer)).NotTo(ContainElement(ContainSubstring("infra")), "the peer is the only infrastructure provider")
}

func TestRenameModuleKeepsTheRest(t *testing.T) {
	g := NewWithT(t)
	in := []byte("module github.com/x/y\n\ngo 1.26.0\n\nreplace a => a v1.0.0\n")
	g.Expect(string(renameModule(in, "scratch/peer"))).To(Equal("module scratch/peer\n\ngo 1.26.0\n\nreplace a => a v1.0.0\n"))
}

func TestWithContractLabelsKeepsExistingLabels(t *testing.T) {
	g := NewWithT(t)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}}
	g.Expect(withContractLabels(crd).Labels).To(Equal(map[string]string{
		"a": "b", "cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta2",
	}))
	g.Expect(withContractLabels(&apiextensionsv1.CustomResourceDefinition{}).Labels).To(HaveLen(2))
}

func TestWriteRequestsCountsWriteVerbsOnly(t *testing.T) {
	g := NewWithT(t)
	g.Expect(writeRequests(map[string]float64{"GET": 10, "LIST": 3, "WATCH": 2, "POST": 4, "PATCH": 5, "PUT": 1, "DELETE": 2, "APPLY": 1})).To(Equal(13.0))
}

// The peer's clusters are the same objects as ours but for the
// infrastructure kinds, whose simulated delays are the benchmark's.
func TestPeerTemplateDiffersOnlyInInfrastructure(t *testing.T) {
	g := NewWithT(t)
	cfg := DefaultConfig()
	cfg.ProvisioningDelay, cfg.BootstrapDelay = 3*time.Second, 2*time.Second
	ours, err := clusterObjects(cfg, "c")
	g.Expect(err).NotTo(HaveOccurred())
	cfg.Peer = true
	peer, err := clusterObjects(cfg, "c")
	g.Expect(err).NotTo(HaveOccurred())
	kinds := func(objs []*unstructured.Unstructured) (out []string) {
		for _, o := range objs {
			out = append(out, o.GetKind())
		}
		return out
	}
	g.Expect(kinds(ours)).To(Equal([]string{"Cluster", "MonolithCluster", "MonolithMachineTemplate", "KubeadmControlPlane", "MonolithMachineTemplate", "KubeadmConfigTemplate", "MachineDeployment"}))
	g.Expect(kinds(peer)).To(Equal([]string{"Cluster", "DevCluster", "DevMachineTemplate", "KubeadmControlPlane", "DevMachineTemplate", "KubeadmConfigTemplate", "MachineDeployment"}))
	for _, o := range peer {
		if o.GetKind() != "DevMachineTemplate" {
			continue
		}
		g.Expect(o.GetAPIVersion()).To(Equal("infrastructure.cluster.x-k8s.io/v1beta2"))
		vm, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "backend", "inMemory", "vm", "provisioning", "startupDuration")
		node, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "backend", "inMemory", "node", "provisioning", "startupDuration")
		g.Expect([]string{vm, node}).To(Equal([]string{"3s", "2s"}))
	}
	g.Expect(infraVersion("DevMachine")).To(Equal("v1beta2"))
	g.Expect(infraVersion("MonolithMachine")).To(Equal("v1alpha1"))
}

func TestSBSTablePrintsBothSides(t *testing.T) {
	g := NewWithT(t)
	run := func(side Side, provider Part) SideRun {
		r := SideRun{Side: side, Provider: provider}
		r.Machines, r.Clusters = 4, 1
		r.Running = []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}
		r.Requests, r.Writes = 40, 20
		r.RequestsByKind = map[string]float64{"PATCH machines/status": 8, "GET secrets": 1}
		r.Changes = map[string]float64{"Cluster status.conditions[MachinesReady]": 6, "Machine other": 1}
		r.Start, r.End = Usage{}, Usage{provider: {CPU: 4 * time.Second}}
		r.Before, r.After = map[Part]uint64{provider: 1 << 20}, map[Part]uint64{provider: 2 << 20}
		r.Milestones = Milestones{
			ControlPlaneMachines: map[Milestone][]time.Duration{MachineRunning: {90 * time.Second}},
			ControlPlanes:        map[Milestone][]time.Duration{ControlPlaneAvailable: {100 * time.Second}},
			Workers:              map[Milestone][]time.Duration{MachineRunning: {110 * time.Second, 120 * time.Second, 130 * time.Second}},
		}
		return r
	}
	s := &SBS{Runs: []SideRun{run(SideOurs, PartMonolith), run(SidePeer, PartPeer)}, PeerCommit: "x"}
	var out bytes.Buffer
	g.Expect(s.writeText(&out)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("ours (infra, inMemory) #1"))
	g.Expect(out.String()).To(ContainSubstring("Cluster API in-memory #1"))
	g.Expect(out.String()).To(ContainSubstring("10 (5)"), "requests per Machine (writes)")
	g.Expect(out.String()).To(ContainSubstring("4.0 s (1000 ms)"), "provider CPU per Machine")
	g.Expect(out.String()).To(ContainSubstring("1024 KiB"), "provider RSS per cluster")
	g.Expect(out.String()).To(MatchRegexp(`PATCH machines/status +2\.0 +2\.0`), "requests per Machine by verb and resource")
	g.Expect(out.String()).NotTo(ContainSubstring("GET secrets"), "kinds below one per two Machines are left out")
	g.Expect(out.String()).To(MatchRegexp(`Cluster status\.conditions\[MachinesReady\] +1\.5 +1\.5`), "changes seen per Machine")
	g.Expect(out.String()).NotTo(ContainSubstring("Machine other"))
	g.Expect(out.String()).To(MatchRegexp(`KubeadmControlPlane Available +100\.0 s / 100\.0 s \(1\)`), "steps p50 / p99 (how many reached it)")
	g.Expect(out.String()).To(MatchRegexp(`worker Machine Running +120\.0 s / 120\.0 s \(3\)`))
	g.Expect(out.String()).To(MatchRegexp(`worker Machine created +— +—`), "a step no Machine was seen past")
}

func TestRequestCountsSinceKeepsWhatGrew(t *testing.T) {
	g := NewWithT(t)
	before := requestCounts{All: 10, Writes: 4, ByKind: map[string]float64{"PATCH machines/status": 3, "GET secrets": 2}}
	after := requestCounts{All: 25, Writes: 9, ByKind: map[string]float64{"PATCH machines/status": 8, "GET secrets": 2, "POST machines": 1}}
	g.Expect(after.since(before)).To(Equal(requestCounts{All: 15, Writes: 5, ByKind: map[string]float64{"PATCH machines/status": 5, "POST machines": 1}}))
}
