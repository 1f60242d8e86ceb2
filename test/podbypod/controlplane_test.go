package podbypod_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"k8s.io/client-go/rest"

	"github.com/capi-monolith/capi-monolith/dev/certs"
)

// apiserverPort is kube-apiserver's port in its pod.
const apiserverPort = 6443

var apiserverContainerPort = network.MustParsePort("6443/tcp")

// controlPlane is the pod of etcd and kube-apiserver.
type controlPlane struct {
	// ip is the pod's IP on the network: KUBERNETES_SERVICE_HOST of pods.
	ip string
	ca *certs.CA
	// config is the admin's, through the port published on 127.0.0.1.
	config *rest.Config
}

// startControlPlane runs etcd and kube-apiserver in one pod on the
// network, kube-apiserver with RBAC, ServiceAccount tokens and aggregator
// routing (webhooks and conversion webhooks are dialled at an endpoint of
// their Service: there is no kube-proxy).
func (d *docker) startControlPlane(ctx context.Context, dir, netName, pauseImage, image string) (*controlPlane, error) {
	sandbox, ip, err := d.startSandbox(ctx, sandboxOptions{
		name: "capi-monolith-podbypod-" + d.run + "-control-plane", image: pauseImage, network: netName,
		publish: true,
	})
	if err != nil {
		return nil, err
	}
	ins, err := d.c.ContainerInspect(ctx, sandbox, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to inspect the control plane pod: %w", err)
	}
	bindings := ins.Container.NetworkSettings.Ports[apiserverContainerPort]
	if len(bindings) == 0 {
		return nil, fmt.Errorf("kube-apiserver's port is not published")
	}
	hostPort := bindings[0].HostPort

	ca, err := certs.NewCA("podbypod-cluster-ca")
	if err != nil {
		return nil, err
	}
	serving, err := ca.Serving(ip, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "10.96.0.1")
	if err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	token := hex.EncodeToString(tok)
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o755); err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{
		"ca.crt":        ca.PEM,
		"apiserver.crt": serving.CertPEM,
		"apiserver.key": serving.KeyPEM,
		"sa.key":        pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"sa.pub":        pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv":    []byte(token + `,podbypod-admin,podbypod-admin,"system:masters"` + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(pki, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	pkiMount := mount.Mount{Type: mount.TypeBind, Source: pki, Target: "/pki", ReadOnly: true}
	if err := d.startIn(ctx, sandbox, "etcd", &container.Config{
		Image: image, Entrypoint: []string{"/etcd"},
		Cmd: []string{
			"--data-dir=/data", "--unsafe-no-fsync=true",
			"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
			"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
			"--initial-cluster=default=http://127.0.0.1:2380",
		},
	}, &container.HostConfig{Tmpfs: map[string]string{"/data": ""}}); err != nil {
		return nil, err
	}
	if err := d.startIn(ctx, sandbox, "kube-apiserver", &container.Config{
		Image: image, Entrypoint: []string{"/kube-apiserver"},
		Cmd: []string{
			"--etcd-servers=http://127.0.0.1:2379",
			"--bind-address=0.0.0.0", fmt.Sprintf("--secure-port=%d", apiserverPort), "--advertise-address=" + ip,
			"--tls-cert-file=/pki/apiserver.crt", "--tls-private-key-file=/pki/apiserver.key",
			"--client-ca-file=/pki/ca.crt", "--token-auth-file=/pki/tokens.csv",
			"--authorization-mode=RBAC",
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=/pki/sa.pub", "--service-account-signing-key-file=/pki/sa.key",
			"--service-cluster-ip-range=10.96.0.0/16",
			// Webhook and conversion Services are resolved to an
			// endpoint's IP, not to their unroutable cluster IP.
			"--enable-aggregator-routing=true",
			// No Pods are ever created: the harness runs the templates.
			"--disable-admission-plugins=ServiceAccount",
		},
	}, &container.HostConfig{Mounts: []mount.Mount{pkiMount}}); err != nil {
		return nil, err
	}
	return &controlPlane{
		ip: ip, ca: ca,
		config: &rest.Config{
			Host: "https://127.0.0.1:" + hostPort, BearerToken: token,
			TLSClientConfig: rest.TLSClientConfig{CAData: ca.PEM},
			QPS:             100, Burst: 200,
		},
	}, nil
}

// sandboxOptions describe a pod's sandbox: the container holding its
// network namespace.
type sandboxOptions struct {
	name, image, network string
	aliases              []string
	labels               map[string]string
	// publish publishes kube-apiserver's port on 127.0.0.1.
	publish bool
}

// startSandbox runs a pause container on the network and returns its id
// and IP: the pod's IP.
func (d *docker) startSandbox(ctx context.Context, o sandboxOptions) (id, ip string, err error) {
	labels := d.labels()
	for k, v := range o.labels {
		labels[k] = v
	}
	cfg := &container.Config{Image: o.image, Labels: labels, Hostname: shortHost(o.name)}
	host := &container.HostConfig{NetworkMode: container.NetworkMode(o.network)}
	if o.publish {
		cfg.ExposedPorts = network.PortSet{apiserverContainerPort: {}}
		host.PortBindings = network.PortMap{apiserverContainerPort: {{HostIP: netip.MustParseAddr("127.0.0.1")}}}
	}
	res, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: o.name, Config: cfg, HostConfig: host,
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			o.network: {Aliases: o.aliases},
		}},
	})
	if err != nil {
		return "", "", fmt.Errorf("failed to create sandbox %s: %w", o.name, err)
	}
	if _, err := d.c.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return "", "", fmt.Errorf("failed to start sandbox %s: %w", o.name, err)
	}
	ins, err := d.c.ContainerInspect(ctx, res.ID, client.ContainerInspectOptions{})
	if err != nil {
		return "", "", fmt.Errorf("failed to inspect sandbox %s: %w", o.name, err)
	}
	ep := ins.Container.NetworkSettings.Networks[o.network]
	if ep == nil || !ep.IPAddress.IsValid() {
		return "", "", fmt.Errorf("sandbox %s has no IP on %s", o.name, o.network)
	}
	return res.ID, ep.IPAddress.String(), nil
}

// startIn runs a container in the sandbox's network namespace.
func (d *docker) startIn(ctx context.Context, sandbox, name string, cfg *container.Config, host *container.HostConfig) error {
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	for k, v := range d.labels() {
		cfg.Labels[k] = v
	}
	host.NetworkMode = container.NetworkMode("container:" + sandbox)
	ins, err := d.c.ContainerInspect(ctx, sandbox, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("failed to inspect sandbox of %s: %w", name, err)
	}
	full := ins.Container.Name[1:] + "-" + name
	res, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: full, Config: cfg, HostConfig: host})
	if err != nil {
		return fmt.Errorf("failed to create container %s: %w", full, err)
	}
	if _, err := d.c.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("failed to start container %s: %w", full, err)
	}
	return nil
}

// shortHost is a hostname of at most 63 characters.
func shortHost(name string) string {
	if len(name) > 63 {
		return name[len(name)-63:]
	}
	return name
}
