package pool

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestPlanRollout(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	ready := func(name string, i int) member { return member{name: name, created: at(i), ready: true} }
	oldReady := func(name string, i int) member {
		return member{name: name, created: at(i), ready: true, outdated: true}
	}
	surge1 := bounds{maxSurge: 1}

	tests := []struct {
		name    string
		desired int
		bounds  bounds
		members []member
		want    plan
	}{
		{name: "an empty pool creates every desired instance at once", desired: 3, bounds: surge1,
			want: plan{create: 3}},
		{name: "a converged pool does nothing", desired: 2, bounds: surge1,
			members: []member{ready("a", 0), ready("b", 1)}, want: plan{}},
		{name: "scale down removes the oldest ready instances", desired: 2, bounds: surge1,
			members: []member{ready("c", 2), ready("a", 0), ready("e", 4), ready("b", 1), ready("d", 3)},
			want:    plan{remove: []string{"a", "b", "c"}}},
		{name: "scale down removes the delete-machine annotated instance first", desired: 2, bounds: surge1,
			members: []member{ready("a", 0), ready("b", 1), {name: "c", created: at(2), ready: true, deleteRequested: true}},
			want:    plan{remove: []string{"c"}}},
		{name: "scale down removes outdated before older up-to-date instances", desired: 1, bounds: surge1,
			members: []member{ready("a", 0), oldReady("b", 1)},
			want:    plan{remove: []string{"b"}}},
		{name: "scale to zero removes everything, ready or not", desired: 0, bounds: surge1,
			members: []member{ready("a", 0), {name: "b", created: at(1)}},
			want:    plan{remove: []string{"a", "b"}}},
		{name: "a scale down waits until more instances are ready than desired", desired: 2, bounds: surge1,
			members: []member{ready("a", 0), ready("b", 1), {name: "c", created: at(2)}, {name: "d", created: at(3)}},
			want:    plan{}},
		{name: "a scale down removes as many ready instances as are ready beyond desired", desired: 2, bounds: surge1,
			members: []member{ready("a", 0), ready("b", 1), ready("c", 2), {name: "d", created: at(3)}},
			want:    plan{remove: []string{"a"}}},
		{name: "a rollout surges one instance before removing an outdated one", desired: 3, bounds: surge1,
			members: []member{oldReady("a", 0), oldReady("b", 1), oldReady("c", 2)},
			want:    plan{create: 1}},
		{name: "a rollout waits for the surge instance to be ready", desired: 3, bounds: surge1,
			members: []member{oldReady("a", 0), oldReady("b", 1), oldReady("c", 2), {name: "d", created: at(3)}},
			want:    plan{}},
		{name: "a rollout removes one outdated instance once the surge one is ready", desired: 3, bounds: surge1,
			members: []member{oldReady("a", 0), oldReady("b", 1), oldReady("c", 2), ready("d", 3)},
			want:    plan{remove: []string{"a"}}},
		{name: "a rollout without surge takes maxUnavailable instances down first", desired: 3, bounds: bounds{maxUnavailable: 1},
			members: []member{oldReady("a", 0), oldReady("b", 1), oldReady("c", 2)},
			want:    plan{remove: []string{"a"}}},
		{name: "a rollout without surge creates the replacement once room is made", desired: 3, bounds: bounds{maxUnavailable: 1},
			members: []member{oldReady("b", 1), oldReady("c", 2)},
			want:    plan{create: 1}},
		{name: "a wider surge replaces more at once", desired: 3, bounds: bounds{maxSurge: 3},
			members: []member{oldReady("a", 0), oldReady("b", 1), oldReady("c", 2)},
			want:    plan{create: 3}},
		{name: "scale up during a rollout stays within the surge", desired: 4, bounds: surge1,
			members: []member{oldReady("a", 0), oldReady("b", 1)},
			want:    plan{create: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(planRollout(tt.desired, tt.bounds, tt.members)).To(Equal(tt.want))
		})
	}
}
