package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// shape is the form a client asked objects in, by its Accept header.
type shape int

const (
	shapeObject   shape = iota
	shapeTable          // meta.k8s.io/v1 Table: kubectl get's server-side printing
	shapeMetadata       // meta.k8s.io/v1 PartialObjectMetadata: metadata-only clients and informers
)

// responseShape reads the first acceptable form in the Accept header;
// anything else accepted (plain JSON) is the object itself.
func responseShape(r *http.Request) shape {
	for _, accept := range strings.Split(r.Header.Get("Accept"), ",") {
		params := map[string]string{}
		for _, p := range strings.Split(accept, ";")[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			params[k] = v
		}
		if params["g"] != "meta.k8s.io" || params["v"] != "v1" {
			continue
		}
		switch params["as"] {
		case "Table":
			return shapeTable
		case "PartialObjectMetadata", "PartialObjectMetadataList":
			return shapeMetadata
		}
	}
	return shapeObject
}

func partialObjectMetadata(u *unstructured.Unstructured) map[string]any {
	return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": u.Object["metadata"]}
}

// table is the meta.k8s.io/v1 Table kubectl get prints: NAME and AGE for
// every kind, and kube-apiserver's columns for Nodes, Pods, Namespaces,
// core Events, ComponentStatuses and the kinds of `kubectl get all`
// (Services, Deployments, DaemonSets, ReplicaSets, StatefulSets,
// ReplicationControllers, Jobs, CronJobs, HorizontalPodAutoscalers).
func table(res *resource, items []*unstructured.Unstructured, rv string) *metav1.Table {
	if res.custom != nil {
		// A CRD's own columns; ones it cannot print fall back to NAME and AGE.
		if t, err := customTable(res, items, rv); err == nil {
			return t
		}
	}
	var cells []func(*unstructured.Unstructured) any
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: rv},
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: "Name of the object"},
		},
	}
	column := func(name string, cell func(*unstructured.Unstructured) any) {
		t.ColumnDefinitions = append(t.ColumnDefinitions, metav1.TableColumnDefinition{Name: name, Type: "string"})
		cells = append(cells, cell)
	}
	age := func(u *unstructured.Unstructured) any {
		return duration.HumanDuration(time.Since(u.GetCreationTimestamp().Time))
	}
	phase := func(u *unstructured.Unstructured) any {
		p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return p
	}
	// The columns kube-apiserver prints for these kinds.
	switch {
	case res.gv == coreV1 && res.name == "nodes":
		column("Status", nodeStatus)
		column("Roles", nodeRoles)
		column("Age", age)
		column("Version", func(u *unstructured.Unstructured) any {
			v, _, _ := unstructured.NestedString(u.Object, "status", "nodeInfo", "kubeletVersion")
			return v
		})
	case res.gv == coreV1 && res.name == "pods":
		column("Ready", podReady)
		column("Status", phase)
		column("Restarts", podRestarts)
		column("Age", age)
	case res.gv == coreV1 && res.name == "namespaces":
		column("Status", phase)
		column("Age", age)
	case res.gv == appsV1 && res.name == "deployments":
		column("Ready", func(u *unstructured.Unstructured) any {
			return fmt.Sprintf("%d/%d", int64At(u, "status", "readyReplicas"), int64At(u, "spec", "replicas"))
		})
		column("Up-to-date", func(u *unstructured.Unstructured) any { return int64At(u, "status", "updatedReplicas") })
		column("Available", func(u *unstructured.Unstructured) any { return int64At(u, "status", "availableReplicas") })
		column("Age", age)
	case res.gv == appsV1 && res.name == "daemonsets":
		for _, c := range []struct{ name, field string }{
			{"Desired", "desiredNumberScheduled"}, {"Current", "currentNumberScheduled"}, {"Ready", "numberReady"},
			{"Up-to-date", "updatedNumberScheduled"}, {"Available", "numberAvailable"},
		} {
			column(c.name, func(u *unstructured.Unstructured) any { return int64At(u, "status", c.field) })
		}
		column("Age", age)
	case res.gv == coreV1 && res.name == "events":
		// As kube-apiserver prints Events: the name only with -o wide.
		t.ColumnDefinitions[0].Priority = 1
		column("Last Seen", func(u *unstructured.Unstructured) any {
			for _, f := range []string{"lastTimestamp", "eventTime"} {
				if ts, ok, _ := unstructured.NestedString(u.Object, f); ok && ts != "" {
					if parsed, err := time.Parse(time.RFC3339, ts); err == nil {
						return duration.HumanDuration(time.Since(parsed))
					}
				}
			}
			return age(u)
		})
		column("Type", func(u *unstructured.Unstructured) any { return stringAt(u, "type") })
		column("Reason", func(u *unstructured.Unstructured) any { return stringAt(u, "reason") })
		column("Object", func(u *unstructured.Unstructured) any {
			return strings.ToLower(stringAt(u, "involvedObject", "kind")) + "/" + stringAt(u, "involvedObject", "name")
		})
		column("Message", func(u *unstructured.Unstructured) any { return stringAt(u, "message") })
	case res.gv == coreV1 && res.name == "services":
		column("Type", func(u *unstructured.Unstructured) any { return stringOr(stringAt(u, "spec", "type"), "ClusterIP") })
		column("Cluster-IP", func(u *unstructured.Unstructured) any { return stringOr(stringAt(u, "spec", "clusterIP"), "<none>") })
		column("External-IP", serviceExternalIP)
		column("Port(s)", servicePorts)
		column("Age", age)
	case res.gv == appsV1 && res.name == "replicasets", res.gv == coreV1 && res.name == "replicationcontrollers":
		column("Desired", func(u *unstructured.Unstructured) any { return replicas(u) })
		column("Current", func(u *unstructured.Unstructured) any { return int64At(u, "status", "replicas") })
		column("Ready", func(u *unstructured.Unstructured) any { return int64At(u, "status", "readyReplicas") })
		column("Age", age)
	case res.gv == appsV1 && res.name == "statefulsets":
		column("Ready", func(u *unstructured.Unstructured) any {
			return fmt.Sprintf("%d/%d", int64At(u, "status", "readyReplicas"), replicas(u))
		})
		column("Age", age)
	case res.gv.Group == "batch" && res.name == "jobs":
		column("Status", jobStatus)
		column("Completions", func(u *unstructured.Unstructured) any {
			completions, ok, _ := unstructured.NestedInt64(u.Object, "spec", "completions")
			parallelism, parallel, _ := unstructured.NestedInt64(u.Object, "spec", "parallelism")
			switch {
			case !ok && parallel:
				return fmt.Sprintf("%d/1 of %d", int64At(u, "status", "succeeded"), parallelism)
			case !ok:
				completions = 1 // kube-apiserver's default
			}
			return fmt.Sprintf("%d/%d", int64At(u, "status", "succeeded"), completions)
		})
		column("Duration", jobDuration)
		column("Age", age)
	case res.gv.Group == "batch" && res.name == "cronjobs":
		column("Schedule", func(u *unstructured.Unstructured) any { return stringAt(u, "spec", "schedule") })
		column("Timezone", func(u *unstructured.Unstructured) any { return stringOr(stringAt(u, "spec", "timeZone"), "<none>") })
		column("Suspend", func(u *unstructured.Unstructured) any {
			if suspend, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); suspend {
				return "True"
			}
			return "False"
		})
		column("Active", func(u *unstructured.Unstructured) any {
			active, _, _ := unstructured.NestedSlice(u.Object, "status", "active")
			return int64(len(active))
		})
		column("Last Schedule", func(u *unstructured.Unstructured) any { return since(stringAt(u, "status", "lastScheduleTime")) })
		column("Age", age)
	case res.gv.Group == "autoscaling" && res.name == "horizontalpodautoscalers":
		column("Reference", func(u *unstructured.Unstructured) any {
			return stringAt(u, "spec", "scaleTargetRef", "kind") + "/" + stringAt(u, "spec", "scaleTargetRef", "name")
		})
		column("Targets", func(*unstructured.Unstructured) any { return "<unknown>" })
		column("MinPods", func(u *unstructured.Unstructured) any {
			if v, ok, _ := unstructured.NestedInt64(u.Object, "spec", "minReplicas"); ok {
				return v
			}
			return int64(1)
		})
		column("MaxPods", func(u *unstructured.Unstructured) any { return int64At(u, "spec", "maxReplicas") })
		column("Replicas", func(u *unstructured.Unstructured) any { return int64At(u, "status", "currentReplicas") })
		column("Age", age)
	case res.gv == coreV1 && res.name == "componentstatuses":
		column("Status", func(u *unstructured.Unstructured) any {
			conditions, _, _ := unstructured.NestedSlice(u.Object, "conditions")
			for _, c := range conditions {
				if m, _ := c.(map[string]any); m != nil && m["type"] == "Healthy" {
					if m["status"] == "True" {
						return "Healthy"
					}
					return "Unhealthy"
				}
			}
			return "Unknown"
		})
		column("Message", func(u *unstructured.Unstructured) any { return conditionField(u, "message") })
		column("Error", func(u *unstructured.Unstructured) any { return conditionField(u, "error") })
	default:
		column("Age", age)
	}
	for _, u := range items {
		row := []any{u.GetName()}
		for _, cell := range cells {
			row = append(row, cell(u))
		}
		// The object as PartialObjectMetadata: kubectl reads names,
		// namespaces and labels from it.
		t.Rows = append(t.Rows, metav1.TableRow{Cells: row, Object: runtime.RawExtension{Object: &unstructured.Unstructured{Object: partialObjectMetadata(u)}}})
	}
	return t
}

func nodeStatus(u *unstructured.Unstructured) any {
	status := "Unknown"
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			switch m["status"] {
			case "True":
				status = "Ready"
			default:
				status = "NotReady"
			}
		}
	}
	if unschedulable, _, _ := unstructured.NestedBool(u.Object, "spec", "unschedulable"); unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// nodeRoles reads node-role.kubernetes.io/<role> and kubernetes.io/role
// labels, as kubectl's node printer does.
func nodeRoles(u *unstructured.Unstructured) any {
	var roles []string
	for k, v := range u.GetLabels() {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			if role := strings.TrimPrefix(k, "node-role.kubernetes.io/"); role != "" {
				roles = append(roles, role)
			}
		case k == "kubernetes.io/role" && v != "":
			roles = append(roles, v)
		}
	}
	if len(roles) == 0 {
		return "<none>"
	}
	slices.Sort(roles)
	return strings.Join(slices.Compact(roles), ",")
}

func containerStatuses(u *unstructured.Unstructured) []map[string]any {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "containerStatuses")
	var out []map[string]any
	for _, c := range raw {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func podReady(u *unstructured.Unstructured) any {
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "containers")
	ready := 0
	for _, c := range containerStatuses(u) {
		if r, _ := c["ready"].(bool); r {
			ready++
		}
	}
	return fmt.Sprintf("%d/%d", ready, len(containers))
}

func podRestarts(u *unstructured.Unstructured) any {
	var restarts int64
	for _, c := range containerStatuses(u) {
		if n, ok := c["restartCount"].(int64); ok {
			restarts += n
		}
	}
	return restarts
}

func int64At(u *unstructured.Unstructured, path ...string) int64 {
	v, _, _ := unstructured.NestedInt64(u.Object, path...)
	return v
}

func stringAt(u *unstructured.Unstructured, path ...string) string {
	v, _, _ := unstructured.NestedString(u.Object, path...)
	return v
}

func stringOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}

// replicas is spec.replicas, 1 (kube-apiserver's default) when unset.
func replicas(u *unstructured.Unstructured) int64 {
	if v, ok, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); ok {
		return v
	}
	return 1
}

// since is the age of an RFC 3339 time, <none> without one.
func since(ts string) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return "<none>"
	}
	return duration.HumanDuration(time.Since(t))
}

func serviceExternalIP(u *unstructured.Unstructured) any {
	var ips []string
	ingress, _, _ := unstructured.NestedSlice(u.Object, "status", "loadBalancer", "ingress")
	for _, i := range ingress {
		if m, _ := i.(map[string]any); m != nil {
			for _, k := range []string{"ip", "hostname"} {
				if v, _ := m[k].(string); v != "" {
					ips = append(ips, v)
					break
				}
			}
		}
	}
	external, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "externalIPs")
	ips = append(ips, external...)
	switch stringAt(u, "spec", "type") {
	case "ExternalName":
		return stringAt(u, "spec", "externalName")
	case "LoadBalancer":
		if len(ips) == 0 {
			return "<pending>"
		}
	}
	if len(ips) == 0 {
		return "<none>"
	}
	return strings.Join(ips, ",")
}

func servicePorts(u *unstructured.Unstructured) any {
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
	var out []string
	for _, p := range ports {
		m, _ := p.(map[string]any)
		if m == nil {
			continue
		}
		port, _, _ := unstructured.NestedInt64(m, "port")
		protocol, _ := m["protocol"].(string)
		protocol = stringOr(protocol, "TCP")
		if nodePort, ok, _ := unstructured.NestedInt64(m, "nodePort"); ok && nodePort != 0 {
			out = append(out, fmt.Sprintf("%d:%d/%s", port, nodePort, protocol))
			continue
		}
		out = append(out, fmt.Sprintf("%d/%s", port, protocol))
	}
	if len(out) == 0 {
		return "<none>"
	}
	return strings.Join(out, ",")
}

// jobStatus is the STATUS column of kubectl get jobs: the terminal or
// suspended condition that is True, else Running.
func jobStatus(u *unstructured.Unstructured) any {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	status := "Running"
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m == nil || m["status"] != "True" {
			continue
		}
		switch m["type"] {
		case "Complete", "Failed":
			return m["type"]
		case "Suspended":
			status = "Suspended"
		case "FailureTarget":
			status = "FailureTarget"
		case "SuccessCriteriaMet":
			status = "SuccessCriteriaMet"
		}
	}
	return status
}

func jobDuration(u *unstructured.Unstructured) any {
	start, err := time.Parse(time.RFC3339, stringAt(u, "status", "startTime"))
	if err != nil {
		return ""
	}
	end := time.Now()
	if t, err := time.Parse(time.RFC3339, stringAt(u, "status", "completionTime")); err == nil {
		end = t
	}
	return duration.HumanDuration(end.Sub(start))
}

func conditionField(u *unstructured.Unstructured, name string) any {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "conditions")
	for _, c := range conditions {
		if m, _ := c.(map[string]any); m != nil && m["type"] == "Healthy" {
			v, _ := m[name].(string)
			return v
		}
	}
	return ""
}
