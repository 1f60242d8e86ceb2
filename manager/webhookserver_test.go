package manager

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/capi-monolith/capi-monolith/modules"
)

type plainModule struct{ name string }

func (m plainModule) Name() string                                         { return m.name }
func (plainModule) AddToScheme(*runtime.Scheme) error                      { return nil }
func (plainModule) SetupWithManager(context.Context, modules.Shared) error { return nil }

type providerModule struct {
	plainModule
	srv webhook.Server
	err error
}

func (m providerModule) NewWebhookServer(webhook.Options) (webhook.Server, error) {
	return m.srv, m.err
}

func TestNewWebhookServer(t *testing.T) {
	g := NewWithT(t)
	custom := webhook.NewServer(webhook.Options{Port: 1})

	srv, err := newWebhookServer([]modules.Module{plainModule{"a"}}, webhook.Options{Port: 9443})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv).To(BeAssignableToTypeOf(&webhook.DefaultServer{}), "a plain server without a provider")

	srv, err = newWebhookServer([]modules.Module{plainModule{"a"}, providerModule{plainModule: plainModule{"p"}, srv: custom}}, webhook.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv).To(BeIdenticalTo(custom), "the enabled provider's server")

	_, err = newWebhookServer([]modules.Module{providerModule{plainModule: plainModule{"p"}, err: errors.New("bad CA")}}, webhook.Options{})
	g.Expect(err).To(MatchError(`failed to create the webhook server of module "p": bad CA`))

	_, err = newWebhookServer([]modules.Module{providerModule{plainModule: plainModule{"p"}}, providerModule{plainModule: plainModule{"q"}}}, webhook.Options{})
	g.Expect(err).To(MatchError(`modules "p" and "q" both provide the webhook server`))
}
