package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// diagnosticsReader names the ServiceAccount and RBAC objects GrantDiagnostics
// creates.
const diagnosticsReader = "capi-monolith-bench-diagnostics"

// GrantDiagnostics returns a bearer token the secure diagnostics endpoint
// accepts for /metrics and /debug/pprof/*: a ServiceAccount's token bound to
// a ClusterRole allowing exactly those URLs, which is how a Prometheus or an
// operator reads a Cluster API provider. The endpoint checks it with a
// TokenReview and a SubjectAccessReview against the same apiserver.
func GrantDiagnostics(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("failed to create a clientset: %w", err)
	}
	const ns = "default"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: diagnosticsReader}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("failed to create ServiceAccount %s: %w", diagnosticsReader, err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: diagnosticsReader},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics", "/debug/pprof/*"}, Verbs: []string{"get"}}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("failed to create ClusterRole %s: %w", diagnosticsReader, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: diagnosticsReader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: diagnosticsReader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: diagnosticsReader}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("failed to create ClusterRoleBinding %s: %w", diagnosticsReader, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, diagnosticsReader, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 60 * 60)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to request a token for ServiceAccount %s: %w", diagnosticsReader, err)
	}
	return tr.Status.Token, nil
}

// Metrics are the metric families the process serves, by name.
type Metrics map[string]*dto.MetricFamily

// Metrics scrapes the process's /metrics.
func (d Diagnostics) Metrics(ctx context.Context) (Metrics, error) {
	resp, err := d.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("failed to parse /metrics: %w", err)
	}
	return families, nil
}

// Sum adds up the counters, gauges and histogram counts of one family whose
// labels include every label in match (name, value, name, value...).
func (m Metrics) Sum(name string, match ...string) float64 {
	f, ok := m[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, metric := range f.GetMetric() {
		if !hasLabels(metric, match) {
			continue
		}
		switch {
		case metric.Counter != nil:
			sum += metric.GetCounter().GetValue()
		case metric.Gauge != nil:
			sum += metric.GetGauge().GetValue()
		case metric.Histogram != nil:
			sum += float64(metric.GetHistogram().GetSampleCount())
		case metric.Untyped != nil:
			sum += metric.GetUntyped().GetValue()
		}
	}
	return sum
}

// ByLabel returns one family's values keyed by the value of one label.
func (m Metrics) ByLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, metric := range m[name].GetMetric() {
		for _, l := range metric.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += metric.GetGauge().GetValue() + metric.GetCounter().GetValue()
			}
		}
	}
	return out
}

// ByLabels returns one family's values keyed by the values of labels,
// joined by spaces in their order ("PATCH 409").
func (m Metrics) ByLabels(name string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, metric := range m[name].GetMetric() {
		values := make([]string, len(labels))
		for i, want := range labels {
			for _, l := range metric.GetLabel() {
				if l.GetName() == want {
					values[i] = l.GetValue()
				}
			}
		}
		out[strings.Join(values, " ")] += metric.GetGauge().GetValue() + metric.GetCounter().GetValue()
	}
	return out
}

func hasLabels(metric *dto.Metric, match []string) bool {
	for i := 0; i+1 < len(match); i += 2 {
		found := false
		for _, l := range metric.GetLabel() {
			if l.GetName() == match[i] && l.GetValue() == match[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// SaveProfile writes one of the process's pprof profiles ("heap",
// "profile?seconds=30", ...) from its diagnostics endpoint to path, for `go
// tool pprof`.
func (d Diagnostics) SaveProfile(ctx context.Context, profile, path string) error {
	resp, err := d.get(ctx, "/debug/pprof/"+profile)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", path, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("failed to save the %s profile: %w", profile, err)
	}
	return f.Close()
}

// Top is `go tool pprof -top` of a profile saved by SaveProfile: the n
// functions that used the most, with flags such as -sample_index=inuse_space.
// binary may be empty: Go's profiles carry their symbols.
func Top(ctx context.Context, binary, profile string, n int, flags ...string) (string, error) {
	args := append([]string{"tool", "pprof", "-top", fmt.Sprintf("-nodecount=%d", n)}, flags...)
	if binary != "" {
		args = append(args, binary)
	}
	out, err := exec.CommandContext(ctx, "go", append(args, profile)...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("go tool pprof: %w\n%s", err, exit.Stderr)
		}
		return "", fmt.Errorf("go tool pprof: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
