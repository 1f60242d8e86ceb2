package scaffold

import (
	"sigs.k8s.io/cluster-api/util/conditions"
)

// ReadyReason is the reason ReasonOfTheFirstIssue gives a summary whose
// conditions are all fine.
const ReadyReason = "Ready"

// ReasonOfTheFirstIssue is a summary merge strategy (SetSummaryCondition's
// option) whose reason is the reason of the first condition, in the
// summary's order, that reports an issue; else of the first that is
// Unknown; else ReadyReason. Cluster API's default strategy gives a
// generic IssuesReported instead, and Cluster API core mirrors the infra
// object's Ready as it is onto the Machine (InfrastructureReady) and the
// MachinePool: the specific reason (PoolExhausted, InvalidConfiguration,
// ...) is what a user or an alert keyed on reasons needs to see there.
// The message is the default strategy's: every issue, each with its
// condition's type.
var ReasonOfTheFirstIssue = conditions.CustomMergeStrategy{
	MergeStrategy: conditions.DefaultMergeStrategy(conditions.ComputeReasonFunc(reasonOfTheFirstIssue)),
}

func reasonOfTheFirstIssue(issues, unknown, _ []conditions.ConditionWithOwnerInfo) string {
	// Each group keeps the summary's order of condition types.
	for _, group := range [][]conditions.ConditionWithOwnerInfo{issues, unknown} {
		for _, c := range group {
			if c.Reason != "" {
				return c.Reason
			}
		}
	}
	return ReadyReason
}
