package harness

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Self is the CPUTimes key of the benchmark process itself.
const Self = "self"

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// CPUTimes are the CPU times (user + system) used so far by this process
// (key Self) and by its direct children, summed by command name: the
// envtest "kube-apiserver" and "etcd". Comparing them with the wall time
// tells whether the machine's cores, and whose, were the limit.
type CPUTimes map[string]time.Duration

// ReadCPUTimes reads the CPU times of this process and its children from
// /proc.
func ReadCPUTimes() (CPUTimes, error) {
	procs, err := family()
	if err != nil {
		return nil, err
	}
	out := CPUTimes{}
	for _, p := range procs {
		out[p.comm] += p.cpu
	}
	return out, nil
}

// ReadRSS returns the resident memory in bytes of this process (key Self)
// and of its direct children by command name, e.g. how large envtest's
// kube-apiserver and etcd have grown.
func ReadRSS() (map[string]uint64, error) {
	procs, err := family()
	if err != nil {
		return nil, err
	}
	page := uint64(os.Getpagesize())
	out := map[string]uint64{}
	for _, p := range procs {
		out[p.comm] += p.rssPages * page
	}
	return out, nil
}

// ProcessCPU returns the CPU time (user + system) a process has used so far,
// e.g. a provider binary the benchmark started.
func ProcessCPU(pid int) (time.Duration, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("failed to read %s: %w", path, err)
	}
	st, err := parseStat(data)
	if err != nil {
		return 0, fmt.Errorf("failed to read %s: %w", path, err)
	}
	return st.cpu, nil
}

// family returns this process, named Self, and its direct children.
func family() ([]stat, error) {
	self := os.Getpid()
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, fmt.Errorf("failed to list processes: %w", err)
	}
	var out []stat
	found := false
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended meanwhile
		}
		st, err := parseStat(data)
		if err != nil {
			return nil, fmt.Errorf("failed to read %s: %w", p, err)
		}
		switch {
		case st.pid == self:
			st.comm, found = Self, true
			out = append(out, st)
		case st.ppid == self:
			out = append(out, st)
		}
	}
	if !found {
		return nil, fmt.Errorf("failed to find this process (%d) in /proc", self)
	}
	return out, nil
}

type stat struct {
	pid, ppid int
	comm      string
	cpu       time.Duration
	rssPages  uint64
}

// parseStat reads proc(5)'s /proc/<pid>/stat: "pid (comm) state ppid ...",
// utime and stime being fields 14 and 15, rss (in pages) field 24. comm may hold spaces and
// parentheses, so the fields are counted from its last ')'.
func parseStat(data []byte) (stat, error) {
	open, closing := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || closing < open {
		return stat{}, fmt.Errorf("no command in %q", data)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data[:open])))
	if err != nil {
		return stat{}, fmt.Errorf("bad pid: %w", err)
	}
	rest := strings.Fields(string(data[closing+1:]))
	// rest[0] is field 3 (state), so field k is rest[k-3].
	if len(rest) < 22 {
		return stat{}, fmt.Errorf("only %d fields after the command", len(rest))
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil {
		return stat{}, fmt.Errorf("bad ppid: %w", err)
	}
	utime, err := strconv.ParseInt(rest[11], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("bad utime: %w", err)
	}
	stime, err := strconv.ParseInt(rest[12], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("bad stime: %w", err)
	}
	rss, err := strconv.ParseUint(rest[21], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("bad rss: %w", err)
	}
	return stat{pid: pid, ppid: ppid, comm: string(data[open+1 : closing]), cpu: time.Duration(utime+stime) * clockTick, rssPages: rss}, nil
}

// Sub returns the CPU time used between before and c.
func (c CPUTimes) Sub(before CPUTimes) CPUTimes {
	out := CPUTimes{}
	for k, v := range c {
		out[k] = v - before[k]
	}
	return out
}

// Cores formats each process's CPU time as cores busy over wall, largest
// first: "kube-apiserver 1.21, etcd 0.30, self 0.25".
func (c CPUTimes) Cores(wall time.Duration) string {
	if wall <= 0 || len(c) == 0 {
		return "–"
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c[a] != c[b] {
			return int(c[b] - c[a])
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, c[k].Seconds()/wall.Seconds())
	}
	return strings.Join(parts, ", ")
}

// Total returns the CPU time of every process together.
func (c CPUTimes) Total() time.Duration {
	var t time.Duration
	for _, v := range c {
		t += v
	}
	return t
}
