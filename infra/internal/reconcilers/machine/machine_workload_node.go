package machine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/remote"

	"github.com/capi-monolith/capi-monolith/contracts/scaffold"
	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

const (
	// A machine whose Node cannot be reached yet is looked at again after
	// as long as it has waited so far, within these bounds: the control
	// plane may take minutes to come up, nothing we watch says when it
	// does (Secrets are not cached), and a management cluster with many
	// machines that never get a workload cluster must not poll hard.
	workloadRecheckMin = 10 * time.Second
	workloadRecheckMax = 5 * time.Minute
	// workloadTimeout bounds one call to a workload cluster, so that an
	// unreachable one never holds a worker.
	workloadTimeout = 10 * time.Second
)

// reconcileWorkloadNode sets the provider ID of the machine's Node in the
// workload cluster when the kubelet did not, as CAPD does for kind nodes:
// Cluster API only links a Machine to a Node by provider ID. It reads the
// workload cluster through its `<cluster>-kubeconfig` Secret; until that
// works it records why (s.Results.workloadNode) and looks again later,
// backing off from status.workloadNode.providerIDStartTime. A machine whose
// status.workloadNode.providerIDSet is already true (the record of an
// earlier reconcile) is not looked at again.
func (r *Reconciler) reconcileWorkloadNode(ctx context.Context, s *scope, node backend.Node) (ctrl.Result, error) {
	mm := s.Object
	// Simulated nodes have no kubelet and no workload cluster to look in.
	if mm.Spec.Backend.Docker == nil || ptr.Deref(mm.Status.WorkloadNode.ProviderIDSet, false) {
		return ctrl.Result{}, nil
	}
	if mm.Status.WorkloadNode.ProviderIDStartTime.IsZero() {
		mm.Status.WorkloadNode.ProviderIDStartTime = metav1.Now()
	}
	p, res := r.setWorkloadNodeProviderID(ctx, mm, s.Cluster, workloadNodeName(mm, node))
	s.Results.workloadNode = p
	if p.Done {
		mm.Status.WorkloadNode.ProviderIDSet = ptr.To(true)
	}
	return res, nil
}

// setWorkloadNodeProviderID sets the provider ID of the Node nodeName in
// the workload cluster, and says how far it got.
func (r *Reconciler) setWorkloadNodeProviderID(ctx context.Context, mm *v1alpha1.MonolithMachine, cluster *clusterv1.Cluster, nodeName string) (*scaffold.Progress, ctrl.Result) {
	cfg, err := remote.RESTConfig(ctx, "monolithmachine", r.Client, client.ObjectKeyFromObject(cluster))
	if err != nil {
		return scaffold.NotDone(v1alpha1.WaitingForWorkloadClusterReason,
			fmt.Sprintf("Cannot read the workload cluster's kubeconfig: %v", err)), ctrl.Result{RequeueAfter: workloadRecheck(mm)}
	}
	cfg.Timeout = workloadTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return scaffold.NotDone(v1alpha1.WaitingForWorkloadClusterReason,
			fmt.Sprintf("Cannot build a client for the workload cluster: %v", err)), ctrl.Result{RequeueAfter: workloadRecheck(mm)}
	}

	node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return scaffold.NotDone(v1alpha1.WaitingForNodeReason,
			fmt.Sprintf("Node %s is not registered in the workload cluster yet", nodeName)), ctrl.Result{RequeueAfter: workloadRecheck(mm)}
	case err != nil:
		return scaffold.NotDone(v1alpha1.WaitingForWorkloadClusterReason,
			fmt.Sprintf("Cannot read Node %s from the workload cluster: %v", nodeName, err)), ctrl.Result{RequeueAfter: workloadRecheck(mm)}
	}

	switch node.Spec.ProviderID {
	case mm.Spec.ProviderID:
	case "":
		if err := setNodeProviderID(ctx, cs, node, mm.Spec.ProviderID); err != nil {
			return scaffold.NotDone(v1alpha1.WaitingForWorkloadClusterReason,
				fmt.Sprintf("Cannot set the provider ID of Node %s: %v", nodeName, err)), ctrl.Result{RequeueAfter: workloadRecheck(mm)}
		}
		ctrl.LoggerFrom(ctx).Info("Set the provider ID of the workload cluster's Node", "node", nodeName, "providerID", mm.Spec.ProviderID)
	default:
		// A Node's provider ID cannot change once set: a mismatch needs a
		// person (most likely two machines share a node name).
		return scaffold.NotDone(v1alpha1.ProviderIDMismatchReason,
			fmt.Sprintf("Node %s has provider ID %s, not %s", nodeName, node.Spec.ProviderID, mm.Spec.ProviderID)), ctrl.Result{RequeueAfter: workloadRecheck(mm)}
	}
	return &scaffold.Progress{Done: true}, ctrl.Result{}
}

// registerNode has a backend that serves the workload API itself register
// the node there, as kubeadm and the kubelet would have; on every
// reconcile, so that a restarted process registers it again.
func registerNode(ctx context.Context, registrar backend.NodeRegistrar, spec backend.NodeSpec, node backend.Node,
	data func(context.Context) (backend.BootstrapData, error)) (*scaffold.Progress, error) {
	registered, err := registrar.RegisterNode(ctx, spec, node, data)
	if err != nil {
		return scaffold.NotDone(v1alpha1.WaitingForWorkloadClusterReason, err.Error()), err
	}
	if registered {
		return &scaffold.Progress{Done: true}, nil
	}
	return nil, nil
}

// setNodeProviderID patches only spec.providerID, so that nothing the
// kubelet or others own is touched; the resourceVersion makes the patch
// fail rather than overwrite a provider ID set meanwhile.
func setNodeProviderID(ctx context.Context, cs kubernetes.Interface, node *corev1.Node, providerID string) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"providerID": providerID},
	})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "capi-monolith"})
	return err
}

// workloadRecheck backs off with the time the provider has been trying to
// set the Node's provider ID.
func workloadRecheck(mm *v1alpha1.MonolithMachine) time.Duration {
	st := mm.Status.WorkloadNode
	if st.ProviderIDStartTime.IsZero() || ptr.Deref(st.ProviderIDSet, false) {
		return workloadRecheckMin
	}
	return min(max(time.Since(st.ProviderIDStartTime.Time), workloadRecheckMin), workloadRecheckMax)
}

// workloadNodeName is the name the node registers under: the hostname the
// backend reported, which is what the kubelet uses by default.
func workloadNodeName(mm *v1alpha1.MonolithMachine, node backend.Node) string {
	for _, a := range node.Addresses {
		if a.Type == clusterv1.MachineHostName && a.Address != "" {
			return a.Address
		}
	}
	return mm.Name
}
