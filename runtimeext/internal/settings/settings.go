// Package settings reads the runtime extension's settings, the
// spec.settings map of its ExtensionConfig that Cluster API sends with every
// request. They are read per request, so editing the ExtensionConfig takes
// effect on the next call, without a restart.
package settings

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Keys of spec.settings.
const (
	// RetryAfterSeconds is how long a blocking hook asks Cluster API to wait
	// when a policy (hold, IP capacity) blocks it. 1 to 3600; default 30.
	RetryAfterSeconds = "retryAfterSeconds"
	// CapacityGate turns the IP capacity gate of BeforeClusterCreate on
	// ("enabled", the default) or off ("disabled").
	CapacityGate = "capacityGate"
	// UpgradeVersions is a comma-separated list of Kubernetes versions
	// GenerateUpgradePlan may step through, added to the Cluster's
	// monolithUpgradeVersions variable.
	UpgradeVersions = "upgradeVersions"
)

// DefaultRetryAfterSeconds is RetryAfterSeconds when unset.
const DefaultRetryAfterSeconds = 30

// Settings are the parsed settings of one request.
type Settings struct {
	RetryAfterSeconds int32
	CapacityGate      bool
	UpgradeVersions   []string
}

// Parse reads raw, reporting every bad value by key. Unknown keys are
// ignored: Cluster API merges settings of several sources.
func Parse(raw map[string]string) (Settings, error) {
	s := Settings{RetryAfterSeconds: DefaultRetryAfterSeconds, CapacityGate: true}
	var errs []error
	if v, ok := raw[RetryAfterSeconds]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 1 || n > 3600 {
			errs = append(errs, fmt.Errorf("setting %s must be a whole number of seconds from 1 to 3600, got %q", RetryAfterSeconds, v))
		} else {
			s.RetryAfterSeconds = int32(n)
		}
	}
	if v, ok := raw[CapacityGate]; ok {
		switch strings.TrimSpace(v) {
		case "enabled":
			s.CapacityGate = true
		case "disabled":
			s.CapacityGate = false
		default:
			errs = append(errs, fmt.Errorf("setting %s must be enabled or disabled, got %q", CapacityGate, v))
		}
	}
	if v, ok := raw[UpgradeVersions]; ok {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				s.UpgradeVersions = append(s.UpgradeVersions, part)
			}
		}
	}
	return s, errors.Join(errs...)
}
