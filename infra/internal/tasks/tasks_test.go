package tasks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capi-monolith/capi-monolith/infra/internal/tasks"
)

var obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}}

func TestATaskRunsOnceReportsProgressAndItsResult(t *testing.T) {
	g := NewWithT(t)
	m := tasks.New(context.Background())
	release := make(chan struct{})
	g.Expect(m.Run("k", obj, func(ctx context.Context, progress func(string)) error {
		progress("step 1 of 2")
		<-release
		return errors.New("step 2 failed")
	})).To(BeTrue())
	// Run returned with the first report, for the reconcile that started
	// the task to record.
	s, _ := m.State("k")
	g.Expect(s.Progress).To(Equal("step 1 of 2"))
	g.Expect(s.Running).To(BeTrue())
	g.Expect(m.Run("k", obj, func(context.Context, func(string)) error { return nil })).To(BeFalse(), "one task per key")

	close(release)
	g.Eventually(func() bool { s, _ := m.State("k"); return s.Running }, 5*time.Second).Should(BeFalse())
	s, ok := m.State("k")
	g.Expect(ok).To(BeTrue())
	g.Expect(s.Err).To(MatchError("step 2 failed"))
	g.Expect(m.Run("k", obj, func(context.Context, func(string)) error { return nil })).To(BeFalse(), "a finished task stays until forgotten")
	m.Forget("k")
	_, ok = m.State("k")
	g.Expect(ok).To(BeFalse())
	g.Expect(m.Run("k", obj, func(context.Context, func(string)) error { return nil })).To(BeTrue(), "a retry after Forget")
}

// A task that reports nothing does not hold Run beyond FirstProgressWait.
func TestRunWaitsForAFirstReportOnlyBriefly(t *testing.T) {
	g := NewWithT(t)
	m := tasks.New(t.Context())
	release := make(chan struct{})
	defer close(release)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		m.Run("k", obj, func(ctx context.Context, _ func(string)) error {
			<-release
			return nil
		})
	}()
	g.Eventually(returned, 5*tasks.FirstProgressWait).Should(BeClosed())
	s, ok := m.State("k")
	g.Expect(ok).To(BeTrue())
	g.Expect(s.Running).To(BeTrue())
	g.Expect(s.Progress).To(BeEmpty())
}

func TestForgetCancelsARunningTask(t *testing.T) {
	g := NewWithT(t)
	m := tasks.New(context.Background())
	cancelled := make(chan error, 1)
	m.Run("k", obj, func(ctx context.Context, _ func(string)) error {
		<-ctx.Done()
		cancelled <- ctx.Err()
		return ctx.Err()
	})
	m.Forget("k")
	g.Eventually(cancelled, 5*time.Second).Should(Receive(MatchError(context.Canceled)))
}

func TestStoppingTheManagerCancelsEveryTask(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	m := tasks.New(ctx)
	cancelled := make(chan struct{})
	m.Run("k", obj, func(ctx context.Context, _ func(string)) error {
		<-ctx.Done()
		close(cancelled)
		return ctx.Err()
	})
	cancel()
	g.Eventually(cancelled, 5*time.Second).Should(BeClosed())
}

func TestTheRunnableCancelsEveryTaskWhenItsContextEnds(t *testing.T) {
	g := NewWithT(t)
	m := tasks.New(context.Background())
	cancelled := make(chan struct{})
	m.Run("k", obj, func(ctx context.Context, _ func(string)) error {
		<-ctx.Done()
		close(cancelled)
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	cancel()
	g.Eventually(done, 5*time.Second).Should(Receive(BeNil()))
	g.Eventually(cancelled, 5*time.Second).Should(BeClosed())
}
