package capimanager

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Tuning holds the runtime knobs Cluster API's book names for its managers
// at scale (docs/book/src/developer/core/tuning.md of the pinned release):
// the management cluster client's rate limit, the workload cluster
// clients' rate limit, controller concurrency and the resync period. A zero
// field leaves the manager's own default, so the zero Tuning adds no flag.
type Tuning struct {
	// KubeAPIQPS and KubeAPIBurst are --kube-api-qps and --kube-api-burst:
	// the managers' client of the management cluster (default 100 and 200).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// ClusterCacheClientQPS and ClusterCacheClientBurst are
	// --clustercache-client-qps and --clustercache-client-burst: each
	// workload cluster's client (default 20 and 30).
	ClusterCacheClientQPS   float32
	ClusterCacheClientBurst int
	// Concurrency sets every --*-concurrency flag of each manager (their
	// defaults range from 10 to 100, see Manager.ConcurrencyFlags).
	Concurrency int
	// SyncPeriod is --sync-period (default 10m).
	SyncPeriod time.Duration
}

// Validate rejects values the managers would refuse or misread, so that a
// bad one fails when dev parses its flags rather than as a manager that
// keeps exiting.
func (t Tuning) Validate() error {
	var errs []error
	if t.KubeAPIQPS < 0 {
		errs = append(errs, fmt.Errorf("--capi-kube-api-qps must not be negative, got %v", t.KubeAPIQPS))
	}
	if t.KubeAPIBurst < 0 {
		errs = append(errs, fmt.Errorf("--capi-kube-api-burst must not be negative, got %d", t.KubeAPIBurst))
	}
	if t.ClusterCacheClientQPS < 0 {
		errs = append(errs, fmt.Errorf("--capi-clustercache-client-qps must not be negative, got %v", t.ClusterCacheClientQPS))
	}
	if t.ClusterCacheClientBurst < 0 {
		errs = append(errs, fmt.Errorf("--capi-clustercache-client-burst must not be negative, got %d", t.ClusterCacheClientBurst))
	}
	if t.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("--capi-concurrency must not be negative, got %d", t.Concurrency))
	}
	if t.SyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("--capi-sync-period must not be negative, got %s", t.SyncPeriod))
	}
	return errors.Join(errs...)
}

// Args are m's command-line flags for t: none for a zero field.
func (t Tuning) Args(m Manager) []string {
	var args []string
	if t.KubeAPIQPS > 0 {
		args = append(args, "--kube-api-qps="+formatFloat(t.KubeAPIQPS))
	}
	if t.KubeAPIBurst > 0 {
		args = append(args, "--kube-api-burst="+strconv.Itoa(t.KubeAPIBurst))
	}
	if t.ClusterCacheClientQPS > 0 {
		args = append(args, "--clustercache-client-qps="+formatFloat(t.ClusterCacheClientQPS))
	}
	if t.ClusterCacheClientBurst > 0 {
		args = append(args, "--clustercache-client-burst="+strconv.Itoa(t.ClusterCacheClientBurst))
	}
	if t.Concurrency > 0 {
		for _, f := range m.ConcurrencyFlags {
			args = append(args, "--"+f+"="+strconv.Itoa(t.Concurrency))
		}
	}
	if t.SyncPeriod > 0 {
		args = append(args, "--sync-period="+t.SyncPeriod.String())
	}
	return args
}

func formatFloat(f float32) string {
	return strconv.FormatFloat(float64(f), 'f', -1, 32)
}
