package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

// Bench is what a benchmark of the binary sets up once: a folder for the
// processes' files, the binary built into it, the envtest apiserver, and a
// token for the processes' diagnostics endpoints.
type Bench struct {
	Dir, Binary, Token string
	Env                *envtest.Environment
}

// NewBench builds the binary and starts the apiserver; progress goes to log.
// Close undoes it.
func NewBench(ctx context.Context, log io.Writer, env harness.EnvOptions) (_ *Bench, retErr error) {
	dir, err := os.MkdirTemp("", "capi-monolith-bench-")
	if err != nil {
		return nil, fmt.Errorf("failed to create a folder for the processes: %w", err)
	}
	b := &Bench{Dir: dir}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, b.Close())
		}
	}()
	fmt.Fprintln(log, "building capi-monolith")
	if b.Binary, err = Build(ctx, dir); err != nil {
		return nil, err
	}
	if b.Env, err = harness.StartEnvironment(ctx, env); err != nil {
		return nil, err
	}
	if b.Token, err = GrantDiagnostics(ctx, b.Env.Config); err != nil {
		return nil, err
	}
	return b, nil
}

// Close stops the apiserver and removes the folder.
func (b *Bench) Close() error {
	var err error
	if b.Env != nil {
		err = b.Env.Stop()
	}
	return errors.Join(err, os.RemoveAll(b.Dir))
}
