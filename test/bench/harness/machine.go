package harness

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Machine describes where figures come from, for the results file.
type Machine struct {
	Date time.Time
	// Arch is `uname -m`.
	Arch string
	// CPUs is the number of CPUs usable by the process (nproc).
	CPUs      int
	GoVersion string
	// Commit is `git rev-parse --short HEAD`, with "+dirty" when tracked
	// files differ from it.
	Commit string
}

// DescribeMachine returns what can be found out; an unknown field reads
// "unknown" rather than failing a benchmark that already ran.
func DescribeMachine(ctx context.Context) Machine {
	m := Machine{
		Date:      time.Now().UTC(),
		Arch:      output(ctx, "uname", "-m"),
		CPUs:      runtime.NumCPU(),
		GoVersion: runtime.Version(),
		Commit:    output(ctx, "git", "rev-parse", "--short", "HEAD"),
	}
	if m.Commit != "unknown" && output(ctx, "git", "status", "--porcelain", "--untracked-files=no") != "" {
		m.Commit += "+dirty"
	}
	return m
}

func output(ctx context.Context, name string, args ...string) string {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "unknown"
	}
	return string(bytes.TrimSpace(out))
}

// LoadAverage returns the 1, 5 and 15 minute load averages from
// /proc/loadavg ("3.10 2.95 2.40"), or "unknown".
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], " ")
}
