package pool

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

func TestRemoveInstanceWithoutAMachine(t *testing.T) {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(infrav1.AddToScheme(scheme)).To(Succeed())
	NewWithT(t).Expect(clusterv1.AddToScheme(scheme)).To(Succeed())
	instance := func(name string, age time.Duration) infrav1.MonolithMachine {
		return infrav1.MonolithMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age))}}
	}
	tests := []struct {
		name      string
		age       time.Duration
		wantGone  bool
		wantRetry bool
	}{
		{name: "a young instance waits for Cluster API to make its Machine", age: time.Second, wantRetry: true},
		{name: "an instance without a Machine after the grace period is deleted", age: 2 * machineGrace, wantGone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mm := instance("p-abcde", tt.age)
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(mm.DeepCopy()).Build()
			r := &Reconciler{Client: c}
			obs := &observation{instances: []infrav1.MonolithMachine{mm}, machines: map[string]*clusterv1.Machine{}}
			wait, err := r.removeInstance(context.Background(), obs, mm.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wait > 0).To(Equal(tt.wantRetry))
			err = c.Get(context.Background(), client.ObjectKeyFromObject(&mm), &infrav1.MonolithMachine{})
			g.Expect(apierrors.IsNotFound(err)).To(Equal(tt.wantGone))
		})
	}
}

func TestRemoveInstanceDeletesItsMachine(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(infrav1.AddToScheme(scheme)).To(Succeed())
	g.Expect(clusterv1.AddToScheme(scheme)).To(Succeed())
	mm := infrav1.MonolithMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-abcde"}}
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-abcde"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(mm.DeepCopy(), m.DeepCopy()).Build()
	r := &Reconciler{Client: c}
	obs := &observation{instances: []infrav1.MonolithMachine{mm}, machines: map[string]*clusterv1.Machine{mm.Name: m}}
	wait, err := r.removeInstance(context.Background(), obs, mm.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wait).To(BeZero())
	g.Expect(apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(m), &clusterv1.Machine{}))).To(BeTrue())
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(&mm), &infrav1.MonolithMachine{})).To(Succeed(),
		"the instance itself is left to Cluster API, which deletes it after the drain")
}
