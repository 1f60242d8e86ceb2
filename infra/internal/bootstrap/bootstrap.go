// Package bootstrap runs a machine's bootstrap data on its node as a
// background task (infra/tasks), once, and reports how it goes (Progress:
// progress while it runs, the reason when it fails, a retry after
// RetryAfter), from which the machine reconciler derives the
// BootstrapExecSucceeded condition. Single machines (infra) and machine pool
// instances (machinepool) share it.
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
	"github.com/capi-monolith/capi-monolith/infra/internal/tasks"
)

// RetryAfter is how long a failed bootstrap waits before it runs again.
const RetryAfter = 30 * time.Second

// DefaultTimeout bounds one run of the bootstrap data: kubeadm init or join
// takes minutes at most; a run still going after this is stuck (a command
// waiting on input or on something that never comes), and fails so that
// the condition says so and the run is retried after RetryAfter.
const DefaultTimeout = 20 * time.Minute

// Options say what to run where.
type Options struct {
	// Client reads the bootstrap data Secret (Secrets bypass the cache).
	Client client.Reader
	// Tasks runs the bootstrap outside Reconcile.
	Tasks *tasks.Manager
	// Backend and Node are where the data runs.
	Backend backend.Machine
	Node    backend.MachineRef
	// SecretName is the bootstrap data Secret, in the machine's namespace.
	SecretName string
	// Timeout bounds one run. Default: DefaultTimeout.
	Timeout time.Duration
	// Quick runs the bootstrap within Reconcile rather than as a task:
	// for a backend whose Bootstrap of this node returns at once
	// (backend.QuickBootstrapper), so that its outcome is known, and
	// written, in the same reconcile as the node.
	Quick bool
}

// Progress is how the bootstrap of a node stands.
type Progress struct {
	// Succeeded is true once the bootstrap data ran to its end.
	Succeeded bool
	// Reason and Message say why not yet: v1alpha1.RunningReason with the
	// task's progress, v1alpha1.InvalidBootstrapDataReason,
	// v1alpha1.UnsupportedBootstrapDataReason or v1alpha1.FailedReason with
	// the error.
	Reason, Message string
}

// Reconcile starts the bootstrap of mm's node, or reports how it goes. The
// task is keyed by mm's UID, so that a deleted and re-created machine starts
// afresh. A machine whose status.bootstrap.succeeded is already true (the
// record of an earlier reconcile) is not bootstrapped again.
func Reconcile(ctx context.Context, mm *v1alpha1.MonolithMachine, opts Options) (Progress, ctrl.Result, error) {
	key := string(mm.UID)
	if ptr.Deref(mm.Status.Bootstrap.Succeeded, false) {
		// The record is in what this reconcile read: the finished task,
		// kept until now (see the success below), can go.
		opts.Tasks.Forget(key)
		return Progress{Succeeded: true}, ctrl.Result{}, nil
	}
	state, ok := opts.Tasks.State(key)
	switch {
	case !ok:
		data, err := Data(ctx, opts.Client, mm.Namespace, opts.SecretName)
		if err != nil {
			// An error: the controller retries with exponential backoff.
			return failed(err), ctrl.Result{}, err
		}
		ctrl.LoggerFrom(ctx).Info("Running bootstrap data on the node", "quick", opts.Quick)
		b, node, timeout := opts.Backend, opts.Node, opts.Timeout
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		run := func(ctx context.Context, progress func(string)) error {
			ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("bootstrap did not finish within %s", timeout))
			defer cancel()
			err := b.Bootstrap(ctx, node, data, progress)
			if err != nil && context.Cause(ctx) != nil && ctx.Err() == context.DeadlineExceeded {
				return context.Cause(ctx)
			}
			return err
		}
		if opts.Quick {
			// As a failed task would: the reason now, a retry (which
			// reads the Secret again) after RetryAfter.
			if err := run(ctx, func(string) {}); err != nil {
				return taskFailed(err), ctrl.Result{RequeueAfter: RetryAfter}, nil
			}
			return Progress{Succeeded: true}, ctrl.Result{}, nil
		}
		// Run returns with the task's first progress report, which is
		// what this reconcile records; a task that already ended is
		// recorded by the reconcile its end triggers.
		opts.Tasks.Run(key, mm, run)
		state, _ = opts.Tasks.State(key)
		return running(state), ctrl.Result{}, nil
	case state.Running:
		return running(state), ctrl.Result{}, nil
	case state.Err != nil:
		if wait := time.Until(state.Finished.Add(RetryAfter)); wait > 0 {
			return taskFailed(state.Err), ctrl.Result{RequeueAfter: wait}, nil
		}
		opts.Tasks.Forget(key)
		return taskFailed(state.Err), ctrl.Result{RequeueAfter: time.Second}, nil
	default:
		// Succeeded, and not forgotten until a reconcile reads
		// status.bootstrap.succeeded back: one that reads the cache before
		// this reconcile's patch reaches it still finds the finished task
		// here, and must not run the bootstrap data again.
		return Progress{Succeeded: true}, ctrl.Result{}, nil
	}
}

// running is the progress of a task not yet seen to end: its last report,
// or Starting before its first.
func running(state tasks.State) Progress {
	msg := state.Progress
	if msg == "" {
		msg = "Starting"
	}
	return Progress{Reason: v1alpha1.RunningReason, Message: msg}
}

func failed(err error) Progress {
	return Progress{Reason: v1alpha1.FailedReason, Message: err.Error()}
}

// taskFailed is the progress of a run that failed: bootstrap data that
// cannot be read (InvalidBootstrapData) or that the node cannot run
// (UnsupportedBootstrapData) says so, anything else is Failed.
func taskFailed(err error) Progress {
	switch {
	case errors.Is(err, backend.ErrInvalidBootstrapData):
		return Progress{Reason: v1alpha1.InvalidBootstrapDataReason, Message: err.Error()}
	case errors.Is(err, backend.ErrUnsupportedBootstrapData):
		return Progress{Reason: v1alpha1.UnsupportedBootstrapDataReason, Message: err.Error()}
	}
	return failed(err)
}

// Data reads a bootstrap data Secret: keys value and format (default
// cloud-config), as Cluster API's bootstrap providers write them.
func Data(ctx context.Context, c client.Reader, namespace, name string) (backend.BootstrapData, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return backend.BootstrapData{}, fmt.Errorf("failed to read bootstrap data Secret %s: %w", name, err)
	}
	value, ok := secret.Data["value"]
	if !ok || len(value) == 0 {
		return backend.BootstrapData{}, fmt.Errorf("bootstrap data Secret %s has no value", name)
	}
	format := string(secret.Data["format"])
	if format == "" {
		format = "cloud-config"
	}
	return backend.BootstrapData{Value: value, Format: format}, nil
}
