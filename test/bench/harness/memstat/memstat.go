package memstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

const (
	statusPath    = "/proc/self/status"
	clearRefsPath = "/proc/self/clear_refs"
	meminfoPath   = "/proc/meminfo"
)

// Status is the process's resident memory, in bytes.
type Status struct {
	// Peak is VmHWM: the largest resident set since the process started or
	// since the last ResetPeak.
	Peak uint64
	// Current is VmRSS.
	Current uint64
}

// Read returns the process's resident memory now.
func Read() (Status, error) {
	data, err := os.ReadFile(statusPath)
	if err != nil {
		return Status{}, fmt.Errorf("failed to read %s: %w", statusPath, err)
	}
	return parse(data)
}

// ReadProcess returns the resident memory of another process, e.g. a
// provider binary the benchmark started.
func ReadProcess(pid int) (Status, error) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return Status{}, fmt.Errorf("failed to read %s: %w", path, err)
	}
	return parse(data)
}

func parse(data []byte) (Status, error) {
	var s Status
	var found int
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, value, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var into *uint64
		switch string(key) {
		case "VmHWM":
			into = &s.Peak
		case "VmRSS":
			into = &s.Current
		default:
			continue
		}
		// The kernel writes "VmRSS:\t  123456 kB".
		fields := bytes.Fields(value)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return Status{}, fmt.Errorf("failed to parse %s line %q", statusPath, sc.Text())
		}
		kb, err := strconv.ParseUint(string(fields[0]), 10, 64)
		if err != nil {
			return Status{}, fmt.Errorf("failed to parse %s line %q: %w", statusPath, sc.Text(), err)
		}
		*into = kb * 1024
		found++
	}
	if err := sc.Err(); err != nil {
		return Status{}, fmt.Errorf("failed to read %s: %w", statusPath, err)
	}
	if found != 2 {
		return Status{}, fmt.Errorf("failed to find VmHWM and VmRSS in %s", statusPath)
	}
	return s, nil
}

// Available returns the machine's MemAvailable: the kernel's estimate of
// the memory that new work can have without swapping, page cache included.
func Available() (uint64, error) {
	data, err := os.ReadFile(meminfoPath)
	if err != nil {
		return 0, fmt.Errorf("failed to read %s: %w", meminfoPath, err)
	}
	return parseAvailable(data)
}

func parseAvailable(data []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		value, ok := bytes.CutPrefix(sc.Bytes(), []byte("MemAvailable:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(value)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return 0, fmt.Errorf("failed to parse %s line %q", meminfoPath, sc.Text())
		}
		kb, err := strconv.ParseUint(string(fields[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("failed to parse %s line %q: %w", meminfoPath, sc.Text(), err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("failed to read %s: %w", meminfoPath, err)
	}
	return 0, fmt.Errorf("failed to find MemAvailable in %s", meminfoPath)
}

// ResetPeak sets VmHWM back to the current resident set (Linux 4.0 and
// later), so that the next Read reports the peak of what ran in between.
// Callers that cannot reset report the process's lifetime peak instead.
func ResetPeak() error {
	// "5" resets the peak resident set size; see proc(5), clear_refs.
	if err := os.WriteFile(clearRefsPath, []byte("5"), 0); err != nil {
		return fmt.Errorf("failed to reset the peak resident set through %s: %w", clearRefsPath, err)
	}
	return nil
}

// Sampler reads VmRSS at a fixed interval in the background and keeps the
// largest value, as a cross-check of VmHWM (and the only peak where VmHWM
// cannot be reset).
type Sampler struct {
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	max     uint64
	samples int
	err     error
}

// StartSampler starts sampling every interval until Stop.
func StartSampler(interval time.Duration) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.sample()
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *Sampler) sample() {
	st, err := Read()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.samples++
	s.max = max(s.max, st.Current)
}

// Stop ends sampling and returns the largest VmRSS seen. It returns the
// first read error, if any read failed.
func (s *Sampler) Stop() (uint64, error) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, s.err
}

// MiB formats bytes as mebibytes with one decimal.
func MiB(b uint64) string {
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64)
}
