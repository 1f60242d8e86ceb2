package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
	"github.com/capi-monolith/capi-monolith/test/bench/harness/process"
)

// CPUProfiling records where the provider and kube-apiserver spend their
// CPU while the clusters come up (-cpu-profile-dir): pprof's CPU profile is
// read in consecutive windows from each one's endpoint, from the first
// create until every machine ran, and the windows are merged into one
// profile per process. pprof serves one window per request, and a request
// longer than kube-apiserver's 60 s request timeout is cut off, hence the
// windows.
type CPUProfiling struct {
	// Dir receives every window and the merged profiles; empty records none.
	Dir string
	// Window is the length of one profile request.
	Window time.Duration
	// Provider is the infrastructure provider's diagnostics endpoint (set
	// by the run once the provider serves it).
	Provider process.Diagnostics
}

// defaultProfileWindow is -cpu-profile-dir's window: well within the
// apiserver's request timeout, and at most this much CPU goes unrecorded
// between two windows or after the last.
const defaultProfileWindow = 30 * time.Second

// CPUProfile is one process's merged profile.
type CPUProfile struct {
	// Process names it ("provider", "kube-apiserver").
	Process string
	// Path is the merged profile, for `go tool pprof`.
	Path string
	// Windows is how many windows were merged.
	Windows int
	// Flat and Cum are pprof -top of the merged profile, by the CPU in
	// each function and by the CPU under it.
	Flat, Cum string
}

// profileSource saves one window of a process's CPU profile to a file.
type profileSource struct {
	name string
	save func(ctx context.Context, profile, path string) error
}

// cpuRecorder takes the windows until stopped.
type cpuRecorder struct {
	cfg     CPUProfiling
	sources []profileSource
	stop    chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	files map[string][]string
	errs  []error
}

// startCPUProfiles starts a window loop per process: the provider (when
// cfg.Provider has an address) and kube-apiserver (read with restCfg's
// admin credentials). A nil recorder when cfg.Dir is empty.
func startCPUProfiles(ctx context.Context, cfg CPUProfiling, restCfg *rest.Config) (*cpuRecorder, error) {
	if cfg.Dir == "" {
		return nil, nil
	}
	if cfg.Window <= 0 {
		cfg.Window = defaultProfileWindow
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", cfg.Dir, err)
	}
	r := &cpuRecorder{cfg: cfg, stop: make(chan struct{}), files: map[string][]string{}}
	if cfg.Provider.Address != "" {
		r.sources = append(r.sources, profileSource{name: "provider", save: cfg.Provider.SaveProfile})
	}
	r.sources = append(r.sources, profileSource{name: "kube-apiserver", save: func(ctx context.Context, profile, path string) error {
		return harness.SaveAPIServerProfile(ctx, restCfg, profile, path)
	}})
	for _, s := range r.sources {
		r.wg.Add(1)
		go r.loop(ctx, s)
	}
	return r, nil
}

// loop takes windows back to back; a window under way when stop comes is
// finished, so the profile covers the run to its end.
func (r *cpuRecorder) loop(ctx context.Context, s profileSource) {
	defer r.wg.Done()
	profile := fmt.Sprintf("profile?seconds=%d", int(r.cfg.Window.Seconds()))
	for i := 0; ; i++ {
		select {
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		path := filepath.Join(r.cfg.Dir, fmt.Sprintf("%s-%03d.pb.gz", s.name, i))
		if err := s.save(ctx, profile, path); err != nil {
			r.mu.Lock()
			r.errs = append(r.errs, fmt.Errorf("%s window %d: %w", s.name, i, err))
			r.mu.Unlock()
			return
		}
		r.mu.Lock()
		r.files[s.name] = append(r.files[s.name], path)
		r.mu.Unlock()
	}
}

// finish waits for the last windows, merges each process's and reads the
// merged profiles' tops.
func (r *cpuRecorder) finish(ctx context.Context) ([]CPUProfile, error) {
	if r == nil {
		return nil, nil
	}
	close(r.stop)
	r.wg.Wait()
	if err := errors.Join(r.errs...); err != nil {
		return nil, fmt.Errorf("failed to record CPU profiles: %w", err)
	}
	var out []CPUProfile
	for _, s := range r.sources {
		files := r.files[s.name]
		if len(files) == 0 {
			continue
		}
		p := CPUProfile{Process: s.name, Path: filepath.Join(r.cfg.Dir, s.name+".pb.gz"), Windows: len(files)}
		if err := mergeProfiles(ctx, p.Path, files); err != nil {
			return out, err
		}
		var err error
		if p.Flat, err = process.Top(ctx, "", p.Path, 20); err != nil {
			return out, err
		}
		if p.Cum, err = process.Top(ctx, "", p.Path, 30, "-cum"); err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// mergeProfiles writes pprof's merge of files (profiles of one kind) to
// path.
func mergeProfiles(ctx context.Context, path string, files []string) error {
	out, err := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof", "-proto"}, files...)...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("failed to merge %d profiles into %s: %w\n%s", len(files), path, err, exit.Stderr)
		}
		return fmt.Errorf("failed to merge %d profiles into %s: %w", len(files), path, err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}

// writeCPUProfiles writes where each process spent its CPU, as Markdown
// (headed by heading) or, with markdown false, as text: each merged
// profile's path and its tops.
func writeCPUProfiles(w io.Writer, heading string, profiles []CPUProfile, markdown bool) {
	if len(profiles) == 0 {
		return
	}
	if markdown {
		fmt.Fprintf(w, "\n%s\n", heading)
	} else {
		fmt.Fprintf(w, "\n%s\n", strings.TrimLeft(heading, "# "))
	}
	for _, p := range profiles {
		fmt.Fprintf(w, "\n%s: %d windows merged into %s (`go tool pprof -top %s`).\n\nBy CPU in the function (flat):\n\n```\n%s\n```\n\nBy CPU under the function (cum):\n\n```\n%s\n```\n",
			p.Process, p.Windows, p.Path, p.Path, p.Flat, p.Cum)
	}
}

// cpuProfilesTitle heads the profiles in a report.
const cpuProfilesTitle = "Where the provider and kube-apiserver spent their CPU (`-cpu-profile-dir`, from the first create until every machine ran)"
