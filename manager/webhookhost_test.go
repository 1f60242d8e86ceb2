package manager

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestValidateAcceptsAnIPOrAHostNameAsWebhookHost(t *testing.T) {
	for host, valid := range map[string]bool{
		"":            true,
		"127.0.0.1":   true,
		"::1":         true,
		"0.0.0.0":     true,
		"localhost":   true,
		"node-1.lan":  true,
		"127.0.0.1:8": false,
		"a b":         false,
		"http://x":    false,
	} {
		t.Run(host, func(t *testing.T) {
			g := NewWithT(t)
			opts := Options{SyncPeriod: 1, KubeAPIQPS: 1, KubeAPIBurst: 1, WebhookHost: host}
			if valid {
				g.Expect(opts.Validate()).To(Succeed())
			} else {
				g.Expect(opts.Validate()).To(MatchError(ContainSubstring("--webhook-host must be an IP address or a host name")))
			}
		})
	}
}
