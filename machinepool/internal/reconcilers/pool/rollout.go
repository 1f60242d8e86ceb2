package pool

import (
	"cmp"
	"slices"
	"time"
)

// member is what the rollout plan knows of one instance that is not being
// deleted.
type member struct {
	name    string
	created time.Time
	// deleteRequested: its Machine (or the instance) carries Cluster API's
	// cluster.x-k8s.io/delete-machine annotation.
	deleteRequested bool
	// outdated: made from another template or Kubernetes version.
	outdated bool
	// ready: provisioned and bootstrapped.
	ready bool
}

// bounds are the pool's rolling replacement settings, defaulted.
type bounds struct {
	maxSurge, maxUnavailable int
}

// plan is what one reconcile does to the pool's instances.
type plan struct {
	// create is the number of instances to add.
	create int
	// remove are the instances whose Machines to delete, in order.
	remove []string
}

// planRollout decides which instances to add and remove so that the pool
// converges on desired up-to-date instances:
//
//   - add up-to-date instances while fewer than desired exist, never more
//     than desired+maxSurge in all;
//   - remove the instances beyond desired, and the outdated ones, in this
//     order: those with the delete-machine annotation, then outdated ones,
//     then the oldest;
//   - a removal that takes a ready instance away is made only while more
//     than desired-maxUnavailable instances are ready, so that a
//     replacement never drops below that (with maxUnavailable 0: only while
//     more instances are ready than desired). Removing an instance that is
//     not ready costs no availability, and is always made.
func planRollout(desired int, b bounds, members []member) plan {
	var p plan
	upToDate := 0
	for _, m := range members {
		if !m.outdated {
			upToDate++
		}
	}
	if missing := desired - upToDate; missing > 0 {
		room := desired + b.maxSurge - len(members)
		p.create = max(min(missing, room), 0)
	}

	ordered := slices.Clone(members)
	slices.SortStableFunc(ordered, func(a, b member) int {
		if a.deleteRequested != b.deleteRequested {
			return boolFirst(a.deleteRequested)
		}
		if a.outdated != b.outdated {
			return boolFirst(a.outdated)
		}
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	ready := 0
	for _, m := range members {
		if m.ready {
			ready++
		}
	}
	budget := ready - (desired - b.maxUnavailable)
	excess := len(members) - desired
	for i, m := range ordered {
		// The first excess instances go, and every outdated one.
		if i >= excess && !m.outdated {
			continue
		}
		if m.ready {
			if budget <= 0 {
				continue
			}
			budget--
		}
		p.remove = append(p.remove, m.name)
	}
	return p
}

func boolFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}
