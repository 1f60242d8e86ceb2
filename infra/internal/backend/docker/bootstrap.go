package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capi-monolith/capi-monolith/infra/internal/backend"
)

const (
	// BootstrapSentinelFile is the Cluster API bootstrap contract's proof
	// that the bootstrap data ran to its end; the data itself writes it.
	BootstrapSentinelFile = "/run/cluster-api/bootstrap-success.complete"
	// durableSentinelFile is the backend's copy of the sentinel on the
	// node's /var volume: /run is a tmpfs that a restart of the node
	// container empties, and the data must not run twice.
	durableSentinelFile = "/var/lib/capi-monolith/bootstrap-success.complete"

	// outputLines is how much of a failed command's output an error shows.
	outputLines = 10
	// maxCommandInError bounds how much of a command an error quotes.
	maxCommandInError = 200
)

// ErrIgnitionUnsupported is returned for bootstrap data in ignition format.
var ErrIgnitionUnsupported = errors.New("ignition bootstrap data is not supported by the docker backend")

// CommandError is a bootstrap step that failed in the node.
type CommandError struct {
	// Step is the 1-based index of the failed step among Steps.
	Step, Steps int
	// Command is the command (a runcmd entry, shortened) or, for a
	// write_files entry, "write <path>".
	Command string
	// ExitCode is the command's exit code.
	ExitCode int
	// Output is the end of the command's output.
	Output string
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("bootstrap step %d of %d failed: %q exited with code %d", e.Step, e.Steps, e.Command, e.ExitCode)
	if e.Output != "" {
		msg += "; last output:\n" + e.Output
	}
	return msg
}

// Bootstrap runs cloud-config bootstrap data in the machine's node: the
// write_files entries (written through exec, content on stdin, never on a
// command line), then the runcmd entries, each with sh -c, stopping at the
// first failure. It does nothing when the bootstrap sentinel shows an
// earlier run completed; after a run, the sentinel must exist.
func (b *Backend) Bootstrap(ctx context.Context, machine backend.MachineRef, data backend.BootstrapData, progress backend.Progress) error {
	switch data.Format {
	case "", "cloud-config":
	case "ignition":
		return ErrIgnitionUnsupported
	default:
		return fmt.Errorf("bootstrap data format %q is not supported by the docker backend", data.Format)
	}
	if progress == nil {
		progress = func(string) {}
	}

	c, found, err := b.findNode(ctx, machine)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("machine %s/%s has no node container", machine.Cluster.Namespace, machine.Name)
	}
	if c.State == nil || !c.State.Running {
		return fmt.Errorf("node container %s: %w", containerNameOf(c), errNotRunning)
	}
	done, err := b.bootstrapDone(ctx, c.ID)
	if err != nil || done {
		return err
	}

	hostname := containerNameOf(c)
	if c.Config != nil && c.Config.Hostname != "" {
		hostname = c.Config.Hostname
	}
	cfg, err := parseCloudConfig(data.Value, hostname)
	if err != nil {
		return err
	}

	log := ctrl.LoggerFrom(ctx).WithValues("container", containerNameOf(c))
	steps := len(cfg.WriteFiles) + len(cfg.RunCmd)
	log.Info("Running bootstrap data", "files", len(cfg.WriteFiles), "commands", len(cfg.RunCmd))
	for i, f := range cfg.WriteFiles {
		step := i + 1
		progress(fmt.Sprintf("writing file %d of %d", step, len(cfg.WriteFiles)))
		if err := b.writeBootstrapFile(ctx, c.ID, f, step, steps); err != nil {
			return err
		}
	}
	for i, cmd := range cfg.RunCmd {
		step := len(cfg.WriteFiles) + i + 1
		progress(fmt.Sprintf("running command %d of %d", i+1, len(cfg.RunCmd)))
		log.V(4).Info("Running bootstrap command", "step", step)
		res, err := b.exec(ctx, c.ID, []string{"sh", "-c", cmd.Script}, nil)
		if err != nil {
			return fmt.Errorf("bootstrap step %d of %d: %w", step, steps, err)
		}
		if res.ExitCode != 0 {
			return &CommandError{Step: step, Steps: steps, Command: shorten(cmd.Script), ExitCode: res.ExitCode, Output: lastLines(res.Output, outputLines)}
		}
	}

	done, err = b.bootstrapDone(ctx, c.ID)
	if err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("bootstrap data ran in %s but did not write %s", containerNameOf(c), BootstrapSentinelFile)
	}
	progress("bootstrap data ran")
	return nil
}

// writeBootstrapFile writes one write_files entry in the node. The
// content goes on stdin; the error shows what the shell said, which never
// includes the content.
func (b *Backend) writeBootstrapFile(ctx context.Context, containerID string, f cloudConfigFile, step, steps int) error {
	content, err := f.decode()
	if err != nil {
		return err
	}
	const script = `set -e
mkdir -p "$(dirname "$1")"
if [ "$2" = append ]; then cat >>"$1"; else cat >"$1"; fi
chmod "$3" "$1"
if [ -n "$4" ]; then chown "$4" "$1"; fi`
	writeMode := "replace"
	if f.Append {
		writeMode = "append"
	}
	p := f.filePath()
	res, err := b.exec(ctx, containerID,
		[]string{"sh", "-c", script, "write-file", p, writeMode, fmt.Sprintf("%04o", uint32(f.mode())), strings.TrimSpace(f.Owner)},
		bytes.NewReader(content))
	if err != nil {
		return fmt.Errorf("bootstrap step %d of %d (write %s): %w", step, steps, p, err)
	}
	if res.ExitCode != 0 {
		return &CommandError{Step: step, Steps: steps, Command: "write " + p, ExitCode: res.ExitCode, Output: lastLines(res.Output, outputLines)}
	}
	return nil
}

// bootstrapDone reports whether the bootstrap data already ran in the
// node. It keeps the durable copy of the sentinel up to date.
func (b *Backend) bootstrapDone(ctx context.Context, containerID string) (bool, error) {
	const script = `if [ -f "$2" ]; then exit 0; fi
if [ -f "$1" ]; then mkdir -p "$(dirname "$2")" && touch "$2" && exit 0; fi
exit 3`
	res, err := b.exec(ctx, containerID, []string{"sh", "-c", script, "check", BootstrapSentinelFile, durableSentinelFile}, nil)
	if err != nil {
		return false, fmt.Errorf("failed to look for the bootstrap sentinel: %w", err)
	}
	switch res.ExitCode {
	case 0:
		return true, nil
	case 3:
		return false, nil
	default:
		return false, fmt.Errorf("failed to look for the bootstrap sentinel: exit code %d: %s", res.ExitCode, lastLines(res.Output, outputLines))
	}
}

// shorten keeps the start of a long command for an error message.
func shorten(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxCommandInError {
		return s
	}
	return s[:maxCommandInError] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
