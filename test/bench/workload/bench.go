package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/test/bench/harness"
)

// Config is what a run measures.
type Config struct {
	// Clusters is how many workload clusters are created at once.
	Clusters int
	// Workers is the MachineDeployment's replicas per cluster (the control
	// plane is always one machine).
	Workers int
	// KubernetesVersion of the control plane and the workers.
	KubernetesVersion string
	// ProvisioningDelay and BootstrapDelay are the inMemory backend's
	// simulated delays, per machine.
	ProvisioningDelay, BootstrapDelay time.Duration
	// Namespace holds every cluster.
	Namespace string
	// Workers creating the objects.
	Concurrency int
	// Poll is how often the Machines and control planes are listed while
	// waiting; the times are exact to within it.
	Poll time.Duration
	// Settle and Window: steady RSS is the mean of VmRSS read once a second
	// for Window, Settle after dev is ready and again after every machine is
	// Running.
	Settle, Window time.Duration
	// Timeout bounds the wait for every machine.
	Timeout time.Duration
	// MinAvailable ends the run, with the figures of that moment, when the
	// machine's MemAvailable falls below it: a size that does not fit is
	// reported rather than left to the OOM killer. 0 never ends it.
	MinAvailable uint64
	// DevArgs are added to `capi-monolith dev`'s command line.
	DevArgs []string
	// AddonObjects, when positive, adds the persistence phase: dev runs
	// with --data-dir, every cluster gets this many objects through its
	// workload API, and dev is restarted on the same state folder (see
	// measureState).
	AddonObjects int
	// CPUProfiling, when its Dir is set, records where the provider and
	// kube-apiserver spend their CPU while the clusters come up.
	CPUProfiling CPUProfiling
	// Peer makes the clusters' infrastructure Cluster API's in-memory
	// provider's DevCluster and DevMachineTemplates (bench-workload-sbs)
	// rather than ours.
	Peer bool
}

// DefaultConfig is `make bench-workload`: 100 clusters of 1 control plane
// machine and 3 workers.
func DefaultConfig() Config {
	return Config{
		Clusters:          100,
		Workers:           3,
		KubernetesVersion: "v1.36.3",
		ProvisioningDelay: time.Second,
		BootstrapDelay:    time.Second,
		Namespace:         "bench-workload",
		Concurrency:       16,
		Poll:              5 * time.Second,
		Settle:            30 * time.Second,
		Window:            10 * time.Second,
		Timeout:           40 * time.Minute,
		MinAvailable:      2 << 30,
		AddonObjects:      200,
	}
}

// Result is one run's figures.
type Result struct {
	Clusters, Machines int
	// Created is the time from the first create to the last.
	Created time.Duration
	// MachinesRunning: from the first create until every Machine was
	// Running with a nodeRef; ControlPlanesAvailable: until every
	// KubeadmControlPlane was Available; AllDone is the later of the two.
	MachinesRunning, ControlPlanesAvailable, AllDone time.Duration
	// Running holds, for each Machine, when it was first seen Running with
	// a nodeRef (from the first create), sorted.
	Running []time.Duration
	// Before and After are the steady RSS of each part before the clusters
	// were created and once every machine ran.
	Before, After map[Part]uint64
	// Start and End are the readings at the first create and when every
	// machine ran: peak RSS (VmHWM) and CPU.
	Start, End Usage
	// Endpoints is the number of workload API listeners (MonolithClusters
	// with an endpoint) at the end.
	Endpoints int
	// Incomplete says what was reached when -timeout ended the wait; the
	// other figures are then those of that moment.
	Incomplete string
	// Progress is what the wait saw every 30 s.
	Progress []string
	// Orphaned counts the Machines Cluster API core's MachineSet left
	// without their MonolithMachine and KubeadmConfig (it rolls them back
	// when its create of the Machine answers with an error, though the
	// apiserver stored the Machine): they never run, so the wait ends
	// when every other Machine runs, and says so.
	Orphaned int
	// Stuck describes up to ten Machines not Running when -timeout ended
	// the wait: where each one stopped, for whoever reads the result.
	Stuck []string
	// LowestAvailable is the machine's lowest MemAvailable from the first
	// create until every machine ran (or the run ended).
	LowestAvailable uint64
	// OutOfMemory is set when MinAvailable ended the run; After is then a
	// single reading taken at once, not a steady one.
	OutOfMemory bool
	// Requests and Writes are the management kube-apiserver's requests
	// (apiserver_request_total), all and writes, from the first create
	// until every machine ran.
	Requests, Writes float64
	// RequestsByKind are the same requests by verb and resource
	// ("PATCH machines/status").
	RequestsByKind map[string]float64
	// CPUProfiles are the provider's and kube-apiserver's merged CPU
	// profiles over the same span (Config.CPUProfiling).
	CPUProfiles []CPUProfile
	// Milestones say when the Machines and control planes passed each step
	// on their way up.
	Milestones Milestones
	// Changes count the changes of the watched objects from the first create
	// until every machine ran, by kind and what changed
	// ("Cluster status.conditions[MachinesReady]"; one change may count
	// under several).
	Changes map[string]float64
}

// PerCluster is the steady RSS that one workload cluster added to part.
func (r Result) PerCluster(part Part) float64 {
	return (float64(r.After[part]) - float64(r.Before[part])) / float64(r.Clusters)
}

// Percentile of the Machines' times to Running.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Running) == 0 {
		return 0
	}
	i := int(float64(len(r.Running)-1) * p)
	return r.Running[i]
}

// NewScheme knows every kind the benchmark creates or reads.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, clusterv1.AddToScheme, bootstrapv1.AddToScheme,
		controlplanev1.AddToScheme, infrav1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Measure runs once against a ready dev: steady RSS before, N clusters
// created at once through an unthrottled client, the wait until every
// Machine is Running with a nodeRef and every control plane Available, and
// steady RSS after. Progress goes to log.
func Measure(ctx context.Context, dev *Dev, cfg Config, log io.Writer) (Result, error) {
	r := Result{Clusters: cfg.Clusters, Machines: cfg.Clusters * (1 + cfg.Workers)}
	restCfg, err := clientcmd.BuildConfigFromFlags("", dev.Kubeconfig)
	if err != nil {
		return r, fmt.Errorf("failed to read dev's kubeconfig: %w", err)
	}
	scheme, err := NewScheme()
	if err != nil {
		return r, err
	}
	// The feeding client has no client-side rate limit, so that creating
	// the objects is never what the figures measure.
	c, err := harness.NewClient(restCfg, scheme, harness.Unthrottled)
	if err != nil {
		return r, err
	}
	fmt.Fprintf(log, "  steady RSS before: waiting %s, then reading for %s\n", cfg.Settle, cfg.Window)
	if r.Before, err = dev.SteadyRSS(ctx, cfg.Settle, cfg.Window); err != nil {
		return r, err
	}
	// The wait reads a watch's copy of the objects, not lists: under the
	// load of hundreds of clusters coming up, kube-apiserver on 2 CPUs
	// answers no list of 2,000 Machines within its 60 s request timeout.
	watching, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	seen, changes, err := watchClusters(watching, restCfg, scheme, cfg.Namespace)
	if err != nil {
		return r, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cfg.Namespace}}); err != nil {
		return r, fmt.Errorf("failed to create namespace %s: %w", cfg.Namespace, err)
	}
	objects := make([][]*unstructured.Unstructured, cfg.Clusters)
	for i := range objects {
		if objects[i], err = clusterObjects(cfg, clusterName(i)); err != nil {
			return r, err
		}
	}

	if r.Start, err = dev.Read(); err != nil {
		return r, err
	}
	requestsBefore, err := apiServerRequests(ctx, restCfg)
	if err != nil {
		return r, err
	}
	guarded, guard := startMemoryGuard(ctx, cfg.MinAvailable)
	defer guard.Stop()
	profiles, err := startCPUProfiles(ctx, cfg.CPUProfiling, restCfg)
	if err != nil {
		return r, err
	}
	start := time.Now()
	fmt.Fprintf(log, "  creating %d clusters (%d machines) with %d goroutines, unthrottled\n", cfg.Clusters, r.Machines, cfg.Concurrency)
	if err := harness.ForEach(guarded, cfg.Clusters, cfg.Concurrency, func(ctx context.Context, i int) error {
		for _, obj := range objects[i] {
			if err := c.Create(ctx, obj); err != nil {
				return fmt.Errorf("failed to create %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
		return nil
	}); err != nil && !guard.Tripped() {
		return r, err
	}
	r.Created = time.Since(start)
	fmt.Fprintf(log, "  created in %s\n", r.Created.Round(10*time.Millisecond))

	waitErr := wait(guarded, c, seen, dev, cfg, start, &r, log)
	if waitErr == nil {
		r.End, waitErr = dev.Read()
	}
	var requestsAfter requestCounts
	if waitErr == nil {
		requestsAfter, waitErr = apiServerRequests(ctx, restCfg)
		r.Changes = changes.Counts()
	}
	// The last windows end up to a window after every machine ran: the
	// figures above are read first.
	if profiles != nil {
		fmt.Fprintf(log, "  finishing the CPU profiles' last window (%s)\n", cfg.CPUProfiling.Window)
	}
	r.CPUProfiles, err = profiles.finish(ctx)
	if err := errors.Join(waitErr, err); err != nil {
		return r, err
	}
	requests := requestsAfter.since(requestsBefore)
	r.Requests, r.Writes, r.RequestsByKind = requests.All, requests.Writes, requests.ByKind
	guard.Stop()
	if r.LowestAvailable, err = guard.Lowest(); err != nil {
		return r, err
	}
	if r.OutOfMemory = guard.Tripped(); r.OutOfMemory {
		// No settling: the machine is short of memory and dev must stop.
		r.After = map[Part]uint64{}
		for part, u := range r.End {
			r.After[part] = u.Memory.Current
		}
		return r, nil
	}
	if r.Incomplete == "" {
		fmt.Fprintf(log, "  every machine Running in %s, every control plane Available in %s\n",
			r.MachinesRunning.Round(100*time.Millisecond), r.ControlPlanesAvailable.Round(100*time.Millisecond))
	}

	if !cfg.Peer {
		list := &infrav1.MonolithClusterList{}
		if err := seen.List(ctx, list, client.InNamespace(cfg.Namespace)); err != nil {
			return r, fmt.Errorf("failed to list MonolithClusters: %w", err)
		}
		for _, mc := range list.Items {
			if mc.Spec.ControlPlaneEndpoint.Port != 0 {
				r.Endpoints++
			}
		}
	}
	fmt.Fprintf(log, "  steady RSS after: waiting %s, then reading for %s\n", cfg.Settle, cfg.Window)
	if r.After, err = dev.SteadyRSS(ctx, cfg.Settle, cfg.Window); err != nil {
		return r, err
	}
	return r, nil
}

// wait lists Machines and KubeadmControlPlanes from seen, the watch's
// copy, every cfg.Poll until every Machine is Running with a nodeRef and
// every control plane Available. c reads the few objects the lists do not
// hold.
func wait(parent context.Context, c client.Client, seen client.Reader, dev *Dev, cfg Config, start time.Time, r *Result, log io.Writer) error {
	ctx, cancel := context.WithTimeout(parent, cfg.Timeout)
	defer cancel()
	running := map[string]time.Duration{}
	lastReport := time.Now()
	orphaned, available := 0, 0
	var machines []clusterv1.Machine
	steps := newMilestoneTracker(start)
	defer func() { r.Milestones = steps.result() }()
	for {
		machineList := &clusterv1.MachineList{}
		kcps := &controlplanev1.KubeadmControlPlaneList{}
		clusters := &clusterv1.ClusterList{}
		err := seen.List(ctx, machineList, client.InNamespace(cfg.Namespace))
		if err == nil {
			err = seen.List(ctx, kcps, client.InNamespace(cfg.Namespace))
		}
		if err == nil {
			err = seen.List(ctx, clusters, client.InNamespace(cfg.Namespace))
		}
		now := time.Since(start)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("failed to read the watched Clusters, Machines and KubeadmControlPlanes: %w", err)
		}
		if err == nil {
			machines = machineList.Items
			steps.observe(now, clusters.Items, machines, kcps.Items)
			for _, m := range machines {
				if _, ok := running[m.Name]; !ok && m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.IsDefined() {
					running[m.Name] = now
				}
			}
			if len(machines) >= r.Machines && r.Machines-len(running) <= orphanChecks(r.Machines) {
				// Only the last few are looked at: one GET each per poll.
				orphaned = countOrphaned(ctx, c, machines, running)
			}
			if len(running) >= r.Machines-orphaned && r.MachinesRunning == 0 {
				r.MachinesRunning = now
				r.Orphaned = orphaned
			}
			available = 0
			for i := range kcps.Items {
				if conditions.IsTrue(&kcps.Items[i], controlplanev1.KubeadmControlPlaneAvailableCondition) {
					available++
				}
			}
			if available >= r.Clusters && r.ControlPlanesAvailable == 0 {
				r.ControlPlanesAvailable = now
			}
		}
		if r.MachinesRunning > 0 && r.ControlPlanesAvailable > 0 {
			r.AllDone = max(r.MachinesRunning, r.ControlPlanesAvailable)
			if r.Orphaned > 0 {
				r.Stuck = stuck(ctx, c, machines, running)
			}
			for _, t := range running {
				r.Running = append(r.Running, t)
			}
			slices.Sort(r.Running)
			return nil
		}
		if time.Since(lastReport) >= 30*time.Second {
			lastReport = time.Now()
			line := fmt.Sprintf("%s: %d Machines exist, %d/%d Running with a nodeRef, %d/%d control planes Available (load %s, MemAvailable %s)",
				now.Round(time.Second), len(machines), len(running), r.Machines, available, r.Clusters, harness.LoadAverage(), availableMiB())
			r.Progress = append(r.Progress, line)
			fmt.Fprintf(log, "  %s\n", line)
		}
		select {
		case <-ctx.Done():
			// -timeout or -min-available: the figures of this moment are
			// still worth having.
			why := "-timeout"
			if parent.Err() != nil {
				cause := context.Cause(parent)
				if !errors.Is(cause, errLowMemory) {
					return parent.Err()
				}
				why = cause.Error()
			}
			r.Incomplete = fmt.Sprintf("after %s (%s): %d/%d Machines Running with a nodeRef, %d/%d control planes Available",
				time.Since(start).Round(time.Second), why, len(running), r.Machines, available, r.Clusters)
			r.AllDone = time.Since(start)
			for _, t := range running {
				r.Running = append(r.Running, t)
			}
			slices.Sort(r.Running)
			if parent.Err() == nil {
				r.Stuck = stuck(parent, c, machines, running)
			}
			fmt.Fprintf(log, "  not done %s\n", r.Incomplete)
			for _, line := range r.Stuck {
				fmt.Fprintf(log, "    %s\n", line)
			}
			return nil
		case <-dev.Exited():
			return fmt.Errorf("capi-monolith dev exited while the clusters came up: %w", dev.exitError())
		case <-time.After(cfg.Poll):
		}
	}
}

// orphanChecks is how few of n Machines must be left not Running before
// the wait looks for orphans among them: 10, or 1% of a larger run (core
// orphaned 16 of 2,000 at 500 clusters).
func orphanChecks(n int) int { return max(10, n/100) }

// orphanAge is how long a Machine's infrastructure object must have been
// missing: a MachineSet makes it before the Machine, so a young Machine
// without one is not an orphan but a Machine the cache saw first.
const orphanAge = 2 * time.Minute

// countOrphaned counts the Machines not Running, older than orphanAge,
// whose MonolithMachine does not exist.
func countOrphaned(ctx context.Context, c client.Client, machines []clusterv1.Machine, running map[string]time.Duration) int {
	n := 0
	for i := range machines {
		m := &machines[i]
		if _, ok := running[m.Name]; ok || time.Since(m.CreationTimestamp.Time) < orphanAge {
			continue
		}
		err := c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, infraMachine(m))
		if apierrors.IsNotFound(err) {
			n++
		}
	}
	return n
}

// stuck says, for up to ten Machines not seen Running, their phase and the
// Machine's and MonolithMachine's conditions that are not True.
func stuck(ctx context.Context, c client.Client, machines []clusterv1.Machine, running map[string]time.Duration) []string {
	var out []string
	for i := range machines {
		m := &machines[i]
		if _, ok := running[m.Name]; ok {
			continue
		}
		if len(out) == 10 {
			out = append(out, "…")
			break
		}
		line := fmt.Sprintf("Machine %s: phase %q, nodeRef %q; not True: %s", m.Name, m.Status.Phase, m.Status.NodeRef.Name, notTrue(m.Status.Conditions))
		mm := infraMachine(m)
		if err := c.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, mm); err == nil {
			line += fmt.Sprintf("; %s not True: %s", mm.GetKind(), notTrueUnstructured(mm))
		}
		out = append(out, line)
	}
	return out
}

func notTrue(cs []metav1.Condition) string {
	var parts []string
	for _, c := range cs {
		if c.Status != metav1.ConditionTrue {
			parts = append(parts, fmt.Sprintf("%s=%s %s %q", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// infraMachine is an empty object of m's infrastructure kind, ours or the
// peer's, read as unstructured so that either can be looked at.
func infraMachine(m *clusterv1.Machine) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(infrav1.GroupVersion.Group + "/" + infraVersion(m.Spec.InfrastructureRef.Kind))
	u.SetKind(m.Spec.InfrastructureRef.Kind)
	return u
}

// infraVersion is the version of the infrastructure kind the benchmark
// creates: ours are v1alpha1, the peer's Dev* kinds v1beta2.
func infraVersion(kind string) string {
	if strings.HasPrefix(kind, "Dev") {
		return "v1beta2"
	}
	return infrav1.GroupVersion.Version
}

// notTrueUnstructured is notTrue of an unstructured object's
// status.conditions.
func notTrueUnstructured(u *unstructured.Unstructured) string {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var parts []string
	for _, c := range raw {
		cond, _ := c.(map[string]any)
		if cond["status"] != string(metav1.ConditionTrue) {
			parts = append(parts, fmt.Sprintf("%v=%v %v %q", cond["type"], cond["status"], cond["reason"], cond["message"]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func clusterName(i int) string { return fmt.Sprintf("wl-%04d", i) }

// clusterTemplate is one workload cluster as a user would apply it: a
// KubeadmControlPlane of one machine and a MachineDeployment of workers with
// a KubeadmConfigTemplate, on the inMemory backend. It is kept here rather
// than taken from the kustomize templates so that the benchmark measures
// the same objects whatever the templates become.
const clusterTemplate = `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: NAME, namespace: NAMESPACE}
spec:
  clusterNetwork:
    pods: {cidrBlocks: [192.168.0.0/16]}
    services: {cidrBlocks: [10.96.0.0/12]}
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: NAME}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: MonolithCluster, name: NAME}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: MonolithCluster
metadata: {name: NAME, namespace: NAMESPACE}
spec:
  backend:
    inMemory: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: MonolithMachineTemplate
metadata: {name: NAME-control-plane, namespace: NAMESPACE}
spec:
  template:
    spec:
      backend:
        inMemory: {provisioningDelay: PROVISIONING, bootstrapDelay: BOOTSTRAP}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata: {name: NAME, namespace: NAMESPACE}
spec:
  replicas: 1
  version: VERSION
  machineTemplate:
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: MonolithMachineTemplate, name: NAME-control-plane}
  kubeadmConfigSpec:
    initConfiguration:
      nodeRegistration: {criSocket: unix:///var/run/containerd/containerd.sock}
    joinConfiguration:
      nodeRegistration: {criSocket: unix:///var/run/containerd/containerd.sock}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: MonolithMachineTemplate
metadata: {name: NAME-md-0, namespace: NAMESPACE}
spec:
  template:
    spec:
      backend:
        inMemory: {provisioningDelay: PROVISIONING, bootstrapDelay: BOOTSTRAP}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: NAME-md-0, namespace: NAMESPACE}
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration: {criSocket: unix:///var/run/containerd/containerd.sock}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: NAME-md-0, namespace: NAMESPACE}
spec:
  clusterName: NAME
  replicas: WORKERS
  template:
    spec:
      clusterName: NAME
      version: VERSION
      bootstrap:
        configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: NAME-md-0}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: MonolithMachineTemplate, name: NAME-md-0}
`

// peerClusterTemplate is clusterTemplate with Cluster API's in-memory
// provider as the infrastructure: its DevCluster and DevMachineTemplates
// with the inMemory backend as its own clusterclass-in-memory.yaml writes
// them, except that its VM and node startup take this benchmark's
// provisioning and bootstrap delays (its template has 10 s and 2 s, with
// 20% jitter) and its etcd and API server none, so that both sides simulate
// the same wait. The rest is clusterTemplate's, object for object: a
// ClusterClass would add the topology controller's work to one side only.
const peerClusterTemplate = `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: NAME, namespace: NAMESPACE}
spec:
  clusterNetwork:
    pods: {cidrBlocks: [192.168.0.0/16]}
    services: {cidrBlocks: [10.96.0.0/12]}
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: NAME}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevCluster, name: NAME}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevCluster
metadata:
  name: NAME
  namespace: NAMESPACE
  # Any annotation: v1.14.2's inMemory backend writes one into the map
  # and panics on a DevCluster without annotations, which its ClusterClass
  # never makes.
  annotations: {bench.capi-monolith.io/side: peer}
spec:
  backend:
    inMemory: {}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata: {name: NAME-control-plane, namespace: NAMESPACE}
spec:
  template:
    spec:
      backend:
        inMemory:
          vm: {provisioning: {startupDuration: PROVISIONING, startupJitter: "0"}}
          node: {provisioning: {startupDuration: BOOTSTRAP, startupJitter: "0"}}
          apiServer: {provisioning: {startupDuration: 0s, startupJitter: "0"}}
          etcd: {provisioning: {startupDuration: 0s, startupJitter: "0"}}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata: {name: NAME, namespace: NAMESPACE}
spec:
  replicas: 1
  version: VERSION
  machineTemplate:
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevMachineTemplate, name: NAME-control-plane}
  kubeadmConfigSpec:
    initConfiguration:
      nodeRegistration: {criSocket: unix:///var/run/containerd/containerd.sock}
    joinConfiguration:
      nodeRegistration: {criSocket: unix:///var/run/containerd/containerd.sock}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DevMachineTemplate
metadata: {name: NAME-md-0, namespace: NAMESPACE}
spec:
  template:
    spec:
      backend:
        inMemory:
          vm: {provisioning: {startupDuration: PROVISIONING, startupJitter: "0"}}
          node: {provisioning: {startupDuration: BOOTSTRAP, startupJitter: "0"}}
          apiServer: {provisioning: {startupDuration: 0s, startupJitter: "0"}}
          etcd: {provisioning: {startupDuration: 0s, startupJitter: "0"}}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: NAME-md-0, namespace: NAMESPACE}
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration: {criSocket: unix:///var/run/containerd/containerd.sock}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: NAME-md-0, namespace: NAMESPACE}
spec:
  clusterName: NAME
  replicas: WORKERS
  template:
    spec:
      clusterName: NAME
      version: VERSION
      bootstrap:
        configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: NAME-md-0}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DevMachineTemplate, name: NAME-md-0}
`

// templateOf is the cluster template of cfg's provider.
func templateOf(cfg Config) string {
	if cfg.Peer {
		return peerClusterTemplate
	}
	return clusterTemplate
}

// clusterObjects returns one cluster's objects in creation order.
func clusterObjects(cfg Config, name string) ([]*unstructured.Unstructured, error) {
	text := strings.NewReplacer(
		"NAMESPACE", cfg.Namespace, "NAME", name, "VERSION", cfg.KubernetesVersion,
		"PROVISIONING", cfg.ProvisioningDelay.String(), "BOOTSTRAP", cfg.BootstrapDelay.String(),
		"WORKERS", fmt.Sprint(cfg.Workers),
	).Replace(templateOf(cfg))
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(text, "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return nil, fmt.Errorf("failed to read the cluster template: %w", err)
		}
		out = append(out, obj)
	}
	return out, nil
}
