package scaffold

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/cluster-api/util/conditions"
)

// Progress is how one step of a reconcile stands, as a phase records it on
// the scope's Results: done, or the reason and message why not yet.
// SetProgressCondition turns it into the step's condition.
type Progress struct {
	Done            bool
	Reason, Message string
}

// NotDone is the progress of a step that is not done, and why.
func NotDone(reason, message string) *Progress { return &Progress{Reason: reason, Message: message} }

// SetProgressCondition sets obj's condition conditionType from p: True with
// doneReason when done, else False with p's reason and message. A nil p
// (the phases did not get to the step) leaves the condition as it was.
func SetProgressCondition(obj Object, conditionType, doneReason string, p *Progress) {
	if p == nil {
		return
	}
	c := metav1.Condition{Type: conditionType, Status: metav1.ConditionFalse, Reason: p.Reason, Message: p.Message, ObservedGeneration: obj.GetGeneration()}
	if p.Done {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, doneReason, ""
	}
	conditions.Set(obj, c)
}
