package dev

import (
	"bytes"
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/capi-monolith/capi-monolith/infra"
	"github.com/capi-monolith/capi-monolith/ipam"
	"github.com/capi-monolith/capi-monolith/modules"
)

// These fail before anything starts: no apiserver, no child process.
func TestCommandRejectsBadFlagsBeforeStartingAnything(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "an unknown module names the valid ones", args: []string{"--enable-modules=infra,dns"}, wantErr: `unknown module(s) "dns"`},
		{name: "an unknown flag is refused", args: []string{"--no-such-flag"}, wantErr: "unknown flag: --no-such-flag"},
		{name: "an empty kubeconfig-out is refused", args: []string{"--kubeconfig-out="}, wantErr: "--kubeconfig-out must not be empty"},
		{name: "stray arguments are refused", args: []string{"serve"}, wantErr: `unexpected arguments ["serve"]`},
		{name: "a module flag is bound", args: []string{"--docker-unprivileged-nodes=maybe"}, wantErr: "docker-unprivileged-nodes"},
		{name: "an unknown Cluster API feature gate is refused", args: []string{"--capi-feature-gates=NoSuchGate=true"}, wantErr: `invalid --capi-feature-gates: unknown Cluster API feature gate "NoSuchGate"`},
		{name: "a feature gate without a boolean is refused", args: []string{"--capi-feature-gates=InPlaceUpdates"}, wantErr: "capi-feature-gates"},
		{name: "a negative Cluster API client rate is refused", args: []string{"--capi-kube-api-qps=-5"}, wantErr: "--capi-kube-api-qps must not be negative"},
		{name: "a Cluster API concurrency that is no number is refused", args: []string{"--capi-concurrency=many"}, wantErr: "capi-concurrency"},
		{name: "a bad manager flag is refused", args: []string{"--sync-period=-1s"}, wantErr: "--sync-period must be positive"},
		{name: "a webhook port is dev's to pick", args: []string{"--webhook-port=9443"}, wantErr: "--webhook-port cannot be set: dev picks a free webhook port"},
		{name: "the webhook certificate and leader election are dev's", args: []string{"--webhook-cert-dir=/tmp/x", "--leader-elect"},
			wantErr: "--webhook-cert-dir, --leader-elect cannot be set"},
		{name: "a missing core binary names the make target", args: []string{"--quiet"},
			env: map[string]string{"CAPI_CORE_MANAGER": "/nonexistent/manager"}, wantErr: "make capi-core"},
		{name: "a missing kubeadm bootstrap binary names the make target", args: []string{"--quiet"},
			env: map[string]string{"CAPI_KUBEADM_BOOTSTRAP_MANAGER": "/nonexistent/manager"}, wantErr: "make capi-kubeadm-bootstrap"},
		{name: "a missing kubeadm control plane binary names the make target", args: []string{"--quiet"},
			env: map[string]string{"CAPI_KUBEADM_CONTROL_PLANE_MANAGER": "/nonexistent/manager"}, wantErr: "make capi-kubeadm-control-plane"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			err := command(context.Background(), testRegistry(t), tt.args, &stdout, &stderr, nil)
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
			g.Expect(stdout.String()).NotTo(ContainSubstring("kubeconfig:"))
		})
	}
}

func TestHelpListsDevAndManagerFlags(t *testing.T) {
	g := NewWithT(t)
	var stdout, stderr bytes.Buffer
	// --help parses the flags and stops.
	g.Expect(command(context.Background(), testRegistry(t), []string{"--help"}, &stdout, &stderr, nil)).To(Succeed())
	g.Expect(stderr.String()).To(ContainSubstring("--data-dir"))
	g.Expect(stderr.String()).To(ContainSubstring("--enable-modules"))
	g.Expect(stderr.String()).To(ContainSubstring("--webhook-host"))
	for _, name := range devOwnedManagerFlags {
		g.Expect(stderr.String()).NotTo(MatchRegexp(`(?m)^\s+--`+name+`\s`), "dev sets --%s itself", name)
	}
}

// testRegistry is a registry of two modules: the binary's own list lives in
// package main.
func testRegistry(t *testing.T) *modules.Registry {
	t.Helper()
	reg, err := modules.NewRegistry(
		modules.Entry{Name: infra.Name, BindFlags: func(fs *pflag.FlagSet) func() modules.Module {
			opts := infra.DefaultOptions()
			opts.BindFlags(fs)
			return func() modules.Module { return infra.New(opts) }
		}},
		modules.Entry{Name: ipam.Name, BindFlags: func(fs *pflag.FlagSet) func() modules.Module {
			opts := ipam.DefaultOptions()
			opts.BindFlags(fs)
			return func() modules.Module { return ipam.New(opts) }
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
