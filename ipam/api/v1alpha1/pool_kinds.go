package v1alpha1

import "k8s.io/apimachinery/pkg/types"

// PoolKind describes one kind of IP pool. PoolKinds is the one table of
// them that code switching on a pool kind reads (the runtime extension's
// capacity gate and topology variables; the ipam module's index), so that a
// new kind is added in one place.
// +kubebuilder:object:generate=false
type PoolKind struct {
	// Kind is the kind's name.
	Kind string
	// Namespaced is true for pools that live in a namespace (a reference
	// from a namespaced object means that namespace), false for
	// cluster-scoped ones.
	Namespaced bool
	// New returns an empty object of the kind.
	New func() Pool
}

// PoolKinds are our pool kinds.
var PoolKinds = []PoolKind{
	{Kind: MonolithIPPoolKind, Namespaced: true, New: func() Pool { return &MonolithIPPool{} }},
	{Kind: GlobalMonolithIPPoolKind, Namespaced: false, New: func() Pool { return &GlobalMonolithIPPool{} }},
}

// PoolKindNamed returns the pool kind named kind, and false when it is not
// one of ours.
func PoolKindNamed(kind string) (PoolKind, bool) {
	for _, k := range PoolKinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return PoolKind{}, false
}

// PoolKindNames are the names of PoolKinds, in order.
func PoolKindNames() []string {
	names := make([]string, 0, len(PoolKinds))
	for _, k := range PoolKinds {
		names = append(names, k.Kind)
	}
	return names
}

// Key returns the object key of the pool of this kind named name, referred
// to from namespace.
func (k PoolKind) Key(namespace, name string) types.NamespacedName {
	if !k.Namespaced {
		namespace = ""
	}
	return types.NamespacedName{Namespace: namespace, Name: name}
}
