package machine

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// adoptLegacyConditions carries over into status fields what releases
// before status.bootstrap and status.workloadNode recorded only in
// conditions, so that a machine they wrote is not bootstrapped again and
// keeps backing off from when it first tried to set its Node's provider
// ID. It is the one place conditions are read as data, and only where the
// fields are still unset: once they are, the conditions are derived from
// them (machine_status.go).
//
// A machine whose status.bootstrap.succeeded is set was written by this
// release, which records it with the bootstrap's success, before any step
// of the workload Node: it has nothing to adopt. Its conditions are not
// legacy data either: a registration in the workload API that failed
// leaves WorkloadNodeProviderIDSet False with no start time (only the
// Docker path backs off from one), which must not be read as an old
// machine's and written back, one status patch more.
func adoptLegacyConditions(mm *v1alpha1.MonolithMachine) {
	if mm.Status.Bootstrap.Succeeded != nil {
		return
	}
	if conditions.IsTrue(mm, v1alpha1.BootstrapExecSucceededCondition) {
		mm.Status.Bootstrap.Succeeded = ptr.To(true)
	}
	st := &mm.Status.WorkloadNode
	if st.ProviderIDSet != nil || !st.ProviderIDStartTime.IsZero() {
		return
	}
	c := conditions.Get(mm, v1alpha1.WorkloadNodeProviderIDSetCondition)
	switch {
	case c == nil:
	case c.Status == metav1.ConditionTrue:
		st.ProviderIDSet = ptr.To(true)
	case c.Status == metav1.ConditionFalse:
		st.ProviderIDStartTime = c.LastTransitionTime
	}
}
