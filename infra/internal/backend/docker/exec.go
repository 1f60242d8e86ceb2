package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
)

// maxOutput bounds the output kept of one command: only its end is shown.
const maxOutput = 64 << 10

// execResult is how one command in a container ended.
type execResult struct {
	ExitCode int
	// Output is the end of stdout and stderr, interleaved.
	Output []byte
}

// exec runs cmd in a container, feeding it stdin (when not nil), and waits
// for it. Cancelling ctx stops waiting; the process is left to the
// container (deleting the machine deletes it).
func (b *Backend) exec(ctx context.Context, containerID string, cmd []string, stdin io.Reader) (execResult, error) {
	created, err := b.client.ExecCreate(ctx, containerID, client.ExecCreateOptions{
		Cmd:          cmd,
		AttachStdin:  stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return execResult{}, fmt.Errorf("failed to create exec in container %s: %w", containerID, err)
	}
	attached, err := b.client.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return execResult{}, fmt.Errorf("failed to start exec in container %s: %w", containerID, err)
	}
	defer attached.Close()
	// The hijacked connection outlives the request's context: tie it to ctx.
	stop := context.AfterFunc(ctx, attached.Close)
	defer stop()

	if stdin != nil {
		go func() {
			// Errors surface as the command's own failure (short input).
			_, _ = io.Copy(attached.Conn, stdin)
			_ = attached.CloseWrite()
		}()
	}
	out := &tailBuffer{max: maxOutput}
	if _, err := stdcopy.StdCopy(out, out, attached.Reader); err != nil {
		if ctx.Err() != nil {
			return execResult{}, ctx.Err()
		}
		return execResult{}, fmt.Errorf("failed to read the output of exec in container %s: %w", containerID, err)
	}
	if ctx.Err() != nil {
		return execResult{}, ctx.Err()
	}

	// The stream ends when the process exits; the daemon may record the
	// exit code a moment later.
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.After(10 * time.Second)
	for {
		ins, err := b.client.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return execResult{}, fmt.Errorf("failed to inspect exec in container %s: %w", containerID, err)
		}
		if !ins.Running {
			return execResult{ExitCode: ins.ExitCode, Output: out.Bytes()}, nil
		}
		select {
		case <-ctx.Done():
			return execResult{}, ctx.Err()
		case <-deadline:
			return execResult{}, fmt.Errorf("exec in container %s: output ended but the process is still running", containerID)
		case <-ticker.C:
		}
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) Bytes() []byte { return t.buf }

// lastLines returns the last n lines of output.
func lastLines(output []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(bytes.ToValidUTF8(output, []byte("?"))), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
