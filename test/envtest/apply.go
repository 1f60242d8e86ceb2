package envtest

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ApplySpec server-side applies obj's spec and annotations (not the rest of
// its metadata) as field manager owner, forcing ownership, with the options
// given: what a controller or the topology controller's dry-run sends.
func (e *Environment) ApplySpec(ctx context.Context, obj client.Object, owner string, opts ...client.ApplyOption) error {
	gvk, err := apiutil.GVKForObject(obj, e.Scheme)
	if err != nil {
		return err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("failed to convert %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": content["spec"]}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	u.SetAnnotations(obj.GetAnnotations())
	opts = append(opts, client.FieldOwner(owner), client.ForceOwnership)
	return e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...)
}

// Warnings records the warnings the apiserver returns (those of webhooks).
type Warnings struct {
	mu   sync.Mutex
	text []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *Warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

// Get returns the warnings received so far.
func (w *Warnings) Get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.text...)
}

// WarningClient returns an uncached client of the environment's scheme whose
// warnings are recorded.
func (e *Environment) WarningClient() (client.Client, *Warnings, error) {
	w := &Warnings{}
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to create a client: %w", err)
	}
	return c, w, nil
}
