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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/remote"
	"sigs.k8s.io/cluster-api/util/conditions"

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
// works it says why in a condition and looks again later.
func (r *Reconciler) reconcileWorkloadNode(ctx context.Context, mm *v1alpha1.MonolithMachine, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	// Simulated nodes have no kubelet and no workload cluster to look in.
	if mm.Spec.Backend.Docker == nil || conditions.IsTrue(mm, v1alpha1.WorkloadNodeProviderIDSetCondition) {
		return ctrl.Result{}, nil
	}
	nodeName := workloadNodeName(mm)
	cfg, err := remote.RESTConfig(ctx, "monolithmachine", r.Client, client.ObjectKeyFromObject(cluster))
	if err != nil {
		setCondition(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse, v1alpha1.WaitingForWorkloadClusterReason,
			fmt.Sprintf("Cannot read the workload cluster's kubeconfig: %v", err))
		return ctrl.Result{RequeueAfter: workloadRecheck(mm)}, nil
	}
	cfg.Timeout = workloadTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		setCondition(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse, v1alpha1.WaitingForWorkloadClusterReason,
			fmt.Sprintf("Cannot build a client for the workload cluster: %v", err))
		return ctrl.Result{RequeueAfter: workloadRecheck(mm)}, nil
	}

	node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		setCondition(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse, v1alpha1.WaitingForNodeReason,
			fmt.Sprintf("Node %s is not registered in the workload cluster yet", nodeName))
		return ctrl.Result{RequeueAfter: workloadRecheck(mm)}, nil
	case err != nil:
		setCondition(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse, v1alpha1.WaitingForWorkloadClusterReason,
			fmt.Sprintf("Cannot read Node %s from the workload cluster: %v", nodeName, err))
		return ctrl.Result{RequeueAfter: workloadRecheck(mm)}, nil
	}

	switch node.Spec.ProviderID {
	case mm.Spec.ProviderID:
	case "":
		if err := setNodeProviderID(ctx, cs, node, mm.Spec.ProviderID); err != nil {
			setCondition(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse, v1alpha1.WaitingForWorkloadClusterReason,
				fmt.Sprintf("Cannot set the provider ID of Node %s: %v", nodeName, err))
			return ctrl.Result{RequeueAfter: workloadRecheck(mm)}, nil
		}
		ctrl.LoggerFrom(ctx).Info("Set the provider ID of the workload cluster's Node", "node", nodeName, "providerID", mm.Spec.ProviderID)
	default:
		// A Node's provider ID cannot change once set: a mismatch needs a
		// person (most likely two machines share a node name).
		setCondition(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse, v1alpha1.ProviderIDMismatchReason,
			fmt.Sprintf("Node %s has provider ID %s, not %s", nodeName, node.Spec.ProviderID, mm.Spec.ProviderID))
		return ctrl.Result{RequeueAfter: workloadRecheck(mm)}, nil
	}
	setCondition(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionTrue, v1alpha1.SetReason, "")
	return ctrl.Result{}, nil
}

// registerNode has a backend that serves the workload API itself register
// the node there, as kubeadm and the kubelet would have; on every
// reconcile, so that a restarted process registers it again.
func registerNode(ctx context.Context, mm *v1alpha1.MonolithMachine, registrar backend.NodeRegistrar, spec backend.NodeSpec, node backend.Node,
	data func(context.Context) (backend.BootstrapData, error)) error {
	registered, err := registrar.RegisterNode(ctx, spec, node, data)
	if err != nil {
		setCondition(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionFalse, v1alpha1.WaitingForWorkloadClusterReason, err.Error())
		return err
	}
	if registered {
		setCondition(mm, v1alpha1.WorkloadNodeProviderIDSetCondition, metav1.ConditionTrue, v1alpha1.SetReason, "")
	}
	return nil
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

// workloadRecheck backs off with the time the condition has been False.
func workloadRecheck(mm *v1alpha1.MonolithMachine) time.Duration {
	c := conditions.Get(mm, v1alpha1.WorkloadNodeProviderIDSetCondition)
	if c == nil || c.Status == metav1.ConditionTrue {
		return workloadRecheckMin
	}
	return min(max(time.Since(c.LastTransitionTime.Time), workloadRecheckMin), workloadRecheckMax)
}

// workloadNodeName is the name the node registers under: the hostname the
// backend reported, which is what the kubelet uses by default.
func workloadNodeName(mm *v1alpha1.MonolithMachine) string {
	for _, a := range mm.Status.Addresses {
		if a.Type == clusterv1.MachineHostName && a.Address != "" {
			return a.Address
		}
	}
	return mm.Name
}
