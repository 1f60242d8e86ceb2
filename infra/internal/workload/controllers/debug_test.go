package controllers

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
)

func TestDebug(t *testing.T) {
	e := newEnv(t, Options{Log: testr.New(t)})
	e.node("cp", true, nil, nil)
	e.workers("w1", "w2")
	e.create(deployments, deployment("web", 2, "nginx"))
	time.Sleep(2 * time.Second)
	for _, r := range []store.Resource{deployments, replicaSets, pods, nodes} {
		objs, _, _ := e.s.List(r, "", store.ListOptions{})
		for _, o := range objs {
			b, _ := json.Marshal(map[string]any{"name": o.GetName(), "status": o.Object["status"], "spec.nodeName": o.Object["spec"].(map[string]any)["nodeName"], "podCIDR": o.Object["spec"].(map[string]any)["podCIDR"]})
			fmt.Println(r.Resource, string(b))
		}
	}
}
