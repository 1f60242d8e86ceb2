package pool

import "time"

// Bounds on what one MachinePool may ask of the pool reconciler. Its
// replicas come from Cluster API's MachinePool, which no webhook of ours
// sees, so the reconciler enforces them.
const (
	// MaxInstances is the most instances a pool has: status.instances and
	// spec.providerIDList hold at most 10000 items (their MaxItems), so a
	// pool beyond it could not report what it has.
	MaxInstances = 10000
	// MaxCreatesPerReconcile bounds the instances one reconcile creates, so
	// that a MachinePool scaled from 1 to 10000 is worked off in steps
	// (each requeued at once) rather than in one call holding the worker.
	MaxCreatesPerReconcile = 50
	// nextStepAfter requeues a pool whose scale-up was cut into steps.
	nextStepAfter = time.Second
)

// boundedReplicas is replicas capped at MaxInstances, and whether it was.
func boundedReplicas(replicas int) (int, bool) {
	if replicas > MaxInstances {
		return MaxInstances, true
	}
	return max(replicas, 0), false
}

// createsNow is how many of want instances one reconcile creates, and
// whether more are left for the next.
func createsNow(want int) (int, bool) {
	if want > MaxCreatesPerReconcile {
		return MaxCreatesPerReconcile, true
	}
	return want, false
}
