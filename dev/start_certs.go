package dev

import (
	"path/filepath"

	"github.com/capi-monolith/capi-monolith/dev/certs"
	"github.com/capi-monolith/capi-monolith/dev/kubeconfig"
)

// writeCerts is step 3: the certificates of every webhook server, and the
// kubeconfig children read.
func (e *Environment) writeCerts(p *plan) error {
	p.webhookHost = callHost(p.mgrOpts.WebhookHost)
	certOpts := certs.Options{}
	if p.webhookHost != loopback {
		certOpts.Hosts = []string{p.webhookHost}
	}
	var err error
	if e.Certs, err = certs.New(certOpts); err != nil {
		return err
	}
	p.certDir = filepath.Join(e.StateDir, "certs")
	if err := e.Certs.Write(p.certDir); err != nil {
		return err
	}
	e.KubeconfigPath = filepath.Join(e.StateDir, "kubeconfig")
	return kubeconfig.WriteFromREST(e.Config, e.KubeconfigPath)
}
