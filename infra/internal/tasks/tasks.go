// Package tasks runs the infra module's long steps (running bootstrap data
// on a node) outside Reconcile, so that a slow node never holds a worker:
// one task per key, its progress readable while it runs (the first report
// already when Run returns), cancelled when its machine is deleted, and the
// machine reconciled again when it ends.
package tasks

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Func is a task's work. It reports progress through the callback and
// returns when done or when ctx is cancelled.
type Func func(ctx context.Context, progress func(string)) error

// State is what is known of a task.
type State struct {
	// Running is true until the task returns.
	Running bool
	// Progress is the task's last progress message.
	Progress string
	// Err is the task's result once it stopped; nil means success.
	Err error
	// Finished is when the task returned.
	Finished time.Time
}

// FirstProgressWait bounds how long Run waits for a new task's first
// progress report.
const FirstProgressWait = time.Second

type task struct {
	cancel context.CancelFunc
	state  State
	// reported is closed at the task's first progress report, or when it
	// returns without one.
	reported     chan struct{}
	reportedOnce sync.Once
}

func (t *task) markReported() { t.reportedOnce.Do(func() { close(t.reported) }) }

// Manager runs tasks; safe for concurrent use. Added to a controller
// manager as a Runnable, it cancels every task when the manager stops.
type Manager struct {
	// base is the context every task derives from: cancelling it cancels
	// all tasks.
	base       context.Context
	cancelBase context.CancelFunc
	events     chan event.GenericEvent

	mu    sync.Mutex
	tasks map[string]*task
}

// New returns a manager whose tasks end when ctx is cancelled or Start's
// context ends.
func New(ctx context.Context) *Manager {
	base, cancel := context.WithCancel(ctx)
	return &Manager{base: base, cancelBase: cancel, events: make(chan event.GenericEvent, 1024), tasks: map[string]*task{}}
}

// Start implements manager.Runnable: it waits for ctx to end, then cancels
// every task.
func (m *Manager) Start(ctx context.Context) error {
	<-ctx.Done()
	m.cancelBase()
	return nil
}

// Source returns the controller source that reconciles a task's object
// when the task ends.
func (m *Manager) Source() source.Source {
	return source.Channel(m.events, &handler.EnqueueRequestForObject{})
}

// Run runs fn for key unless a task for key is running or finished and
// not yet forgotten; it reports whether it started one. obj is reconciled
// when the task ends.
//
// A started task's first progress report is waited for, up to
// FirstProgressWait, so that the reconcile that starts it records the
// task's own first message: a placeholder there is replaced by the next
// reconcile, one status write more per task, and one more change of every
// condition that mirrors it (a Machine's InfrastructureReady and what
// watches it).
func (m *Manager) Run(key string, obj client.Object, fn Func) bool {
	m.mu.Lock()
	if _, ok := m.tasks[key]; ok {
		m.mu.Unlock()
		return false
	}
	ctx, cancel := context.WithCancel(m.base)
	t := &task{cancel: cancel, state: State{Running: true}, reported: make(chan struct{})}
	m.tasks[key] = t
	m.mu.Unlock()
	// Only name and namespace travel: the reconcile reads the object anew.
	ref := obj.DeepCopyObject().(client.Object)
	go func() {
		err := fn(ctx, func(p string) {
			m.mu.Lock()
			t.state.Progress = p
			m.mu.Unlock()
			t.markReported()
		})
		cancel()
		m.mu.Lock()
		t.state.Running, t.state.Err, t.state.Finished = false, err, time.Now()
		m.mu.Unlock()
		t.markReported()
		select {
		case m.events <- event.GenericEvent{Object: ref}:
		case <-m.base.Done():
		}
	}()
	wait := time.NewTimer(FirstProgressWait)
	defer wait.Stop()
	select {
	case <-t.reported:
	case <-wait.C:
	case <-m.base.Done():
	}
	return true
}

// State returns the state of key's task, and false when there is none.
func (m *Manager) State(key string) (State, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tasks[key]
	if !ok {
		return State{}, false
	}
	return t.state, true
}

// Forget cancels key's task if it runs and forgets it, so that Run can
// run a new one (a retry, or a deleted machine).
func (m *Manager) Forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.tasks[key]; ok {
		t.cancel()
		delete(m.tasks, key)
	}
}
