package capimanager

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/component-base/featuregate"

	"sigs.k8s.io/cluster-api/feature"
)

// FeatureGates is the --feature-gates value of DefaultFeatureGates with
// extra set over it (extra wins for a gate both name). A gate the pinned
// Cluster API release does not know is an error naming the gates it knows,
// so that a typo fails at flag parsing rather than as a manager that keeps
// exiting.
func FeatureGates(extra map[string]bool) (string, error) {
	known := feature.MutableGates.GetAll()
	gates := map[string]bool{}
	for _, kv := range strings.Split(DefaultFeatureGates, ",") {
		k, v, _ := strings.Cut(kv, "=")
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", fmt.Errorf("invalid default feature gate %q: %w", kv, err)
		}
		gates[k] = b
	}
	for k, v := range extra {
		if _, ok := known[featuregate.Feature(k)]; !ok {
			return "", fmt.Errorf("unknown Cluster API feature gate %q: Cluster API's managers know %s", k, strings.Join(knownNames(known), ", "))
		}
		gates[k] = v
	}
	pairs := make([]string, 0, len(gates))
	for _, k := range slices.Sorted(maps.Keys(gates)) {
		pairs = append(pairs, k+"="+strconv.FormatBool(gates[k]))
	}
	return strings.Join(pairs, ","), nil
}

func knownNames(known map[featuregate.Feature]featuregate.FeatureSpec) []string {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, string(k))
	}
	slices.Sort(names)
	return names
}
