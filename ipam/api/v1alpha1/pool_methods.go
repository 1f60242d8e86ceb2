package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pool is what both pool kinds have in common, so that one controller,
// webhook and allocator registry serve both.
// +kubebuilder:object:generate=false
type Pool interface {
	client.Object
	GetSpec() *IPPoolSpec
	GetStatus() *IPPoolStatus
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

var (
	_ Pool = &MonolithIPPool{}
	_ Pool = &GlobalMonolithIPPool{}
)

// GetSpec returns the pool's spec.
func (p *MonolithIPPool) GetSpec() *IPPoolSpec { return &p.Spec }

// GetStatus returns the pool's status.
func (p *MonolithIPPool) GetStatus() *IPPoolStatus { return &p.Status }

// GetConditions returns the pool's conditions.
func (p *MonolithIPPool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the pool's conditions.
func (p *MonolithIPPool) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// GetSpec returns the pool's spec.
func (p *GlobalMonolithIPPool) GetSpec() *IPPoolSpec { return &p.Spec }

// GetStatus returns the pool's status.
func (p *GlobalMonolithIPPool) GetStatus() *IPPoolStatus { return &p.Status }

// GetConditions returns the pool's conditions.
func (p *GlobalMonolithIPPool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the pool's conditions.
func (p *GlobalMonolithIPPool) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }
