package main

import (
	"reflect"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// changeCounter counts the changes the watch sees, by kind and by what
// changed ("Cluster status.conditions[MachinesReady]"): most of
// kube-apiserver's work is Cluster API's status patches, and which fields
// move says why one side's objects are patched more often than the other's.
type changeCounter struct {
	mu     sync.Mutex
	counts map[string]float64
}

func newChangeCounter() *changeCounter {
	return &changeCounter{counts: map[string]float64{}}
}

// handler counts every update of kind's objects.
func (c *changeCounter) handler(kind string) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		o, ok1 := oldObj.(client.Object)
		n, ok2 := newObj.(client.Object)
		if !ok1 || !ok2 || o.GetResourceVersion() == n.GetResourceVersion() {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, what := range changedFields(o, n) {
			c.counts[kind+" "+what]++
		}
	}}
}

// Counts is a copy of the counts so far.
func (c *changeCounter) Counts() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]float64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// changedFields names what an update changed: "spec" (a new generation),
// "metadata" (labels, annotations, finalizers, owner references), each
// status field by its JSON name and each condition by its type; "other"
// when none of these did (managed fields alone, say).
func changedFields(oldObj, newObj client.Object) []string {
	var out []string
	if oldObj.GetGeneration() != newObj.GetGeneration() {
		out = append(out, "spec")
	}
	if !reflect.DeepEqual(oldObj.GetLabels(), newObj.GetLabels()) || !reflect.DeepEqual(oldObj.GetAnnotations(), newObj.GetAnnotations()) ||
		!reflect.DeepEqual(oldObj.GetFinalizers(), newObj.GetFinalizers()) || !reflect.DeepEqual(oldObj.GetOwnerReferences(), newObj.GetOwnerReferences()) {
		out = append(out, "metadata")
	}
	out = append(out, statusChanges(reflect.ValueOf(oldObj), reflect.ValueOf(newObj))...)
	if len(out) == 0 {
		out = append(out, "other")
	}
	return out
}

// statusChanges compares the Status fields of two objects of one kind.
func statusChanges(oldObj, newObj reflect.Value) []string {
	for oldObj.Kind() == reflect.Pointer {
		oldObj, newObj = oldObj.Elem(), newObj.Elem()
	}
	if oldObj.Kind() != reflect.Struct {
		return nil
	}
	oldStatus, newStatus := oldObj.FieldByName("Status"), newObj.FieldByName("Status")
	if !oldStatus.IsValid() || oldStatus.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range oldStatus.NumField() {
		field := oldStatus.Type().Field(i)
		if !field.IsExported() {
			continue
		}
		name := "status." + jsonName(field)
		a, b := oldStatus.Field(i).Interface(), newStatus.Field(i).Interface()
		if conds, ok := a.([]metav1.Condition); ok {
			out = append(out, conditionChanges(name, conds, b.([]metav1.Condition))...)
			continue
		}
		if !reflect.DeepEqual(a, b) {
			out = append(out, name)
		}
	}
	return out
}

// conditionChanges names each condition type whose status, reason,
// message or observed generation changed, or that came or went.
func conditionChanges(prefix string, oldConds, newConds []metav1.Condition) []string {
	byType := func(cs []metav1.Condition) map[string]metav1.Condition {
		m := make(map[string]metav1.Condition, len(cs))
		for _, c := range cs {
			m[c.Type] = c
		}
		return m
	}
	o, n := byType(oldConds), byType(newConds)
	var out []string
	for t, nc := range n {
		oc, ok := o[t]
		if !ok || oc.Status != nc.Status || oc.Reason != nc.Reason || oc.Message != nc.Message || oc.ObservedGeneration != nc.ObservedGeneration {
			out = append(out, prefix+"["+t+"]")
		}
	}
	for t := range o {
		if _, ok := n[t]; !ok {
			out = append(out, prefix+"["+t+"]")
		}
	}
	return out
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}
