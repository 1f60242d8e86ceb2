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
func adoptLegacyConditions(mm *v1alpha1.MonolithMachine) {
	if mm.Status.Bootstrap.Succeeded == nil && conditions.IsTrue(mm, v1alpha1.BootstrapExecSucceededCondition) {
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
