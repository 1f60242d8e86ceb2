package envtest

import (
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// LogsEnv turns on the controllers' logs in tests: CAPI_MONOLITH_TEST_LOGS=1.
const LogsEnv = "CAPI_MONOLITH_TEST_LOGS"

// TestLogger is the logger suites hand to controller-runtime: klog when
// CAPI_MONOLITH_TEST_LOGS is set, otherwise nothing, so that a passing run
// stays readable and a failing one can be re-run with logs.
func TestLogger() logr.Logger {
	if os.Getenv(LogsEnv) != "" {
		return klog.Background()
	}
	return logr.Discard()
}
