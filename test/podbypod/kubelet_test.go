package podbypod_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// serviceAccountDir is where a pod finds its ServiceAccount's token.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// pod is one running replica of a Deployment.
type pod struct {
	name, namespace, uid, ip string
	deployment               string
	labels                   map[string]string
	sandbox                  string
	containers               []string
}

// kubelet runs Deployments' pod templates as containers on the network.
// It is driven by the test (sync), not a loop: a killed pod is replaced at
// the test's call, as a ReplicaSet would.
type kubelet struct {
	d              *docker
	c              crclient.Client
	network, pause string
	cp             *controlPlane
	dir            string
	pods           []*pod
	// proxied are the Services' proxy containers, by namespace/name.
	proxied map[string]string
}

// sync runs the missing replicas of every provider Deployment and removes
// the pods of Deployments that are gone (or have too many), then points
// every Service's endpoints at its pods.
func (k *kubelet) sync(ctx context.Context) error {
	list := &appsv1.DeploymentList{}
	if err := k.c.List(ctx, list, crclient.HasLabels{"cluster.x-k8s.io/provider"}); err != nil {
		return fmt.Errorf("failed to list Deployments: %w", err)
	}
	want := map[string]*appsv1.Deployment{}
	for i := range list.Items {
		d := &list.Items[i]
		want[d.Namespace+"/"+d.Name] = d
	}
	var gone []*pod
	have := map[string]int{}
	for _, p := range k.pods {
		key := p.namespace + "/" + p.deployment
		d, ok := want[key]
		if !ok || have[key] >= int(ptr.Deref(d.Spec.Replicas, 1)) {
			gone = append(gone, p)
			continue
		}
		have[key]++
	}
	for _, p := range gone {
		if err := k.kill(ctx, p); err != nil {
			return err
		}
	}
	for key, d := range want {
		for have[key] < int(ptr.Deref(d.Spec.Replicas, 1)) {
			p, err := k.run(ctx, d)
			if err != nil {
				return err
			}
			k.pods = append(k.pods, p)
			have[key]++
		}
	}
	if err := k.proxies(ctx); err != nil {
		return err
	}
	return k.endpoints(ctx)
}

// endpointsHost is the name the pods a Service selects answer to.
func endpointsHost(s corev1.Service) string { return s.Name + "." + s.Namespace + ".endpoints" }

// proxies starts, once per Service with a cluster IP and ports, what
// kube-proxy would be: a container answering to the Service's DNS name
// that forwards each port to its target port on the selected pods (a
// client such as Cluster API core's runtime client dials the Service's
// name and port).
func (k *kubelet) proxies(ctx context.Context) error {
	services := &corev1.ServiceList{}
	if err := k.c.List(ctx, services); err != nil {
		return fmt.Errorf("failed to list Services: %w", err)
	}
	if k.proxied == nil {
		k.proxied = map[string]string{}
	}
	exists := map[string]bool{}
	for _, s := range services.Items {
		exists[s.Namespace+"/"+s.Name] = true
	}
	for key, id := range k.proxied {
		if exists[key] {
			continue
		}
		if _, err := k.d.c.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("failed to remove the proxy of Service %s: %w", key, err)
		}
		delete(k.proxied, key)
	}
	for _, s := range services.Items {
		key := s.Namespace + "/" + s.Name
		if _, ok := k.proxied[key]; ok || len(s.Spec.Selector) == 0 || len(s.Spec.Ports) == 0 || s.Spec.ClusterIP == corev1.ClusterIPNone {
			continue
		}
		var args []string
		for _, sp := range s.Spec.Ports {
			target := sp.TargetPort.IntVal
			if sp.TargetPort.StrVal != "" {
				target = k.namedPort(ctx, s, sp.TargetPort.StrVal)
			}
			if target == 0 {
				target = sp.Port
			}
			args = append(args, fmt.Sprintf("%d=%s:%d", sp.Port, endpointsHost(s), target))
		}
		name := "capi-monolith-podbypod-" + k.d.run + "-svc-" + s.Namespace + "-" + s.Name
		res, err := k.d.c.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:       name,
			Config:     &container.Config{Image: k.pause, Cmd: args, Labels: k.d.labels()},
			HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(k.network)},
			NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
				k.network: {Aliases: []string{s.Name + "." + s.Namespace + ".svc", s.Name + "." + s.Namespace + ".svc.cluster.local"}},
			}},
		})
		if err != nil {
			return fmt.Errorf("failed to create the proxy of Service %s: %w", key, err)
		}
		if _, err := k.d.c.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
			return fmt.Errorf("failed to start the proxy of Service %s: %w", key, err)
		}
		k.proxied[key] = res.ID
	}
	return nil
}

// namedPort is the container port named name in the pod template of a
// Deployment the Service selects.
func (k *kubelet) namedPort(ctx context.Context, s corev1.Service, name string) int32 {
	list := &appsv1.DeploymentList{}
	if err := k.c.List(ctx, list, crclient.InNamespace(s.Namespace)); err != nil {
		return 0
	}
	sel := labels.SelectorFromSet(s.Spec.Selector)
	for _, d := range list.Items {
		if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == name {
					return p.ContainerPort
				}
			}
		}
	}
	return 0
}

// kill SIGKILLs the pod's containers and removes them with its sandbox.
func (k *kubelet) kill(ctx context.Context, p *pod) error {
	for _, id := range append(append([]string{}, p.containers...), p.sandbox) {
		if _, err := k.d.c.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("failed to remove a container of pod %s: %w", p.name, err)
		}
	}
	for i, q := range k.pods {
		if q == p {
			k.pods = append(k.pods[:i], k.pods[i+1:]...)
			break
		}
	}
	return nil
}

// run starts one pod of d: its sandbox with a network alias per Service
// DNS name selecting it, its volumes, then its containers.
func (k *kubelet) run(ctx context.Context, d *appsv1.Deployment) (*pod, error) {
	tmpl := d.Spec.Template
	p := &pod{
		name: d.Name + "-" + utilrand.String(5), namespace: d.Namespace, uid: string(uuid.NewUUID()),
		deployment: d.Name, labels: tmpl.Labels,
	}
	services := &corev1.ServiceList{}
	if err := k.c.List(ctx, services, crclient.InNamespace(d.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to list Services: %w", err)
	}
	var aliases []string
	for _, s := range services.Items {
		if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
			continue
		}
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			// Headless: the Service's name resolves to the pods.
			aliases = append(aliases, s.Name+"."+s.Namespace+".svc", s.Name+"."+s.Namespace+".svc.cluster.local")
		} else {
			// Its proxy (see proxies) dials this name.
			aliases = append(aliases, endpointsHost(s))
		}
	}
	sandbox, ip, err := k.d.startSandbox(ctx, sandboxOptions{
		name: "capi-monolith-podbypod-" + k.d.run + "-" + p.name, image: k.pause, network: k.network,
		aliases: aliases, labels: map[string]string{"podbypod.capi-monolith.dev/pod": p.namespace + "." + p.name},
	})
	if err != nil {
		return nil, err
	}
	p.sandbox, p.ip = sandbox, ip

	vols, err := k.volumes(ctx, p, tmpl.Spec)
	if err != nil {
		return nil, err
	}
	for _, c := range tmpl.Spec.Containers {
		cfg, host, err := k.container(ctx, p, tmpl.Spec, c, vols)
		if err != nil {
			return nil, err
		}
		if err := k.d.startIn(ctx, sandbox, c.Name, cfg, host); err != nil {
			return nil, err
		}
		ins, err := k.d.c.ContainerInspect(ctx, "capi-monolith-podbypod-"+k.d.run+"-"+p.name+"-"+c.Name, client.ContainerInspectOptions{})
		if err != nil {
			return nil, err
		}
		p.containers = append(p.containers, ins.Container.ID)
	}
	return p, nil
}

// volumes writes the pod's Secret, ConfigMap and emptyDir volumes and its
// ServiceAccount token to folders the containers bind-mount, by volume name.
func (k *kubelet) volumes(ctx context.Context, p *pod, spec corev1.PodSpec) (map[string]string, error) {
	out := map[string]string{}
	base := filepath.Join(k.dir, "pods", p.name)
	for _, v := range spec.Volumes {
		dir := filepath.Join(base, v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		files := map[string][]byte{}
		switch {
		case v.Secret != nil:
			s := &corev1.Secret{}
			if err := k.c.Get(ctx, crclient.ObjectKey{Namespace: p.namespace, Name: v.Secret.SecretName}, s); err != nil {
				return nil, fmt.Errorf("pod %s: failed to read Secret volume %s: %w", p.name, v.Name, err)
			}
			files = s.Data
		case v.ConfigMap != nil:
			cm := &corev1.ConfigMap{}
			if err := k.c.Get(ctx, crclient.ObjectKey{Namespace: p.namespace, Name: v.ConfigMap.Name}, cm); err != nil {
				return nil, fmt.Errorf("pod %s: failed to read ConfigMap volume %s: %w", p.name, v.Name, err)
			}
			for key, val := range cm.Data {
				files[key] = []byte(val)
			}
		case v.EmptyDir != nil:
			// Writable by the container's user, as an emptyDir is.
			if err := os.Chmod(dir, 0o1777); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("pod %s: volume %s: only Secret, ConfigMap and emptyDir volumes are run", p.name, v.Name)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				return nil, err
			}
		}
		out[v.Name] = dir
	}
	if ptr.Deref(spec.AutomountServiceAccountToken, true) {
		sa := spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
		obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: sa}}
		if err := k.c.SubResource("token").Create(ctx, obj, tr); err != nil {
			return nil, fmt.Errorf("pod %s: failed to request a token for ServiceAccount %s: %w", p.name, sa, err)
		}
		dir := filepath.Join(base, "serviceaccount")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		for name, b := range map[string][]byte{
			"token": []byte(tr.Status.Token), "ca.crt": k.cp.ca.PEM, "namespace": []byte(p.namespace),
		} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				return nil, err
			}
		}
		out[""] = dir
	}
	return out, nil
}

// container is c as Docker runs it in the pod.
func (k *kubelet) container(ctx context.Context, p *pod, spec corev1.PodSpec, c corev1.Container, vols map[string]string) (*container.Config, *container.HostConfig, error) {
	env := map[string]string{
		"KUBERNETES_SERVICE_HOST": k.cp.ip, "KUBERNETES_SERVICE_PORT": strconv.Itoa(apiserverPort),
	}
	order := []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}
	if len(c.EnvFrom) > 0 {
		return nil, nil, fmt.Errorf("pod %s: envFrom is not run", p.name)
	}
	for _, e := range c.Env {
		val, err := k.envValue(ctx, p, spec, c, e, env)
		if err != nil {
			return nil, nil, err
		}
		if _, ok := env[e.Name]; !ok {
			order = append(order, e.Name)
		}
		env[e.Name] = val
	}
	cfg := &container.Config{
		Image:      c.Image,
		Entrypoint: expandAll(c.Command, env),
		Cmd:        expandAll(c.Args, env),
		WorkingDir: c.WorkingDir,
		Labels:     map[string]string{"podbypod.capi-monolith.dev/pod": p.namespace + "." + p.name},
	}
	for _, name := range order {
		cfg.Env = append(cfg.Env, name+"="+env[name])
	}
	host := &container.HostConfig{}
	psc := ptr.Deref(spec.SecurityContext, corev1.PodSecurityContext{})
	sc := ptr.Deref(c.SecurityContext, corev1.SecurityContext{})
	uid, gid := sc.RunAsUser, sc.RunAsGroup
	if uid == nil {
		uid = psc.RunAsUser
	}
	if gid == nil {
		gid = psc.RunAsGroup
	}
	if uid != nil {
		cfg.User = strconv.FormatInt(*uid, 10)
		if gid != nil {
			cfg.User += ":" + strconv.FormatInt(*gid, 10)
		}
	}
	if ptr.Deref(sc.RunAsNonRoot, ptr.Deref(psc.RunAsNonRoot, false)) && (uid == nil || *uid == 0) {
		return nil, nil, fmt.Errorf("pod %s: container %s must run as non-root and names no non-root user", p.name, c.Name)
	}
	for _, g := range psc.SupplementalGroups {
		host.GroupAdd = append(host.GroupAdd, strconv.FormatInt(g, 10))
	}
	host.ReadonlyRootfs = ptr.Deref(sc.ReadOnlyRootFilesystem, false)
	host.Privileged = ptr.Deref(sc.Privileged, false)
	if sc.Capabilities != nil {
		for _, cap := range sc.Capabilities.Drop {
			host.CapDrop = append(host.CapDrop, string(cap))
		}
		for _, cap := range sc.Capabilities.Add {
			host.CapAdd = append(host.CapAdd, string(cap))
		}
	}
	if !ptr.Deref(sc.AllowPrivilegeEscalation, true) {
		host.SecurityOpt = append(host.SecurityOpt, "no-new-privileges")
	}
	for _, m := range c.VolumeMounts {
		src, ok := vols[m.Name]
		if !ok || m.SubPath != "" || m.SubPathExpr != "" {
			return nil, nil, fmt.Errorf("pod %s: volume mount %s is not run", p.name, m.Name)
		}
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	if src, ok := vols[""]; ok {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: src, Target: serviceAccountDir, ReadOnly: true})
	}
	return cfg, host, nil
}

// envValue resolves one env entry: a value with $(VAR) references to the
// entries before it, or the downward API's field of the pod.
func (k *kubelet) envValue(ctx context.Context, p *pod, spec corev1.PodSpec, c corev1.Container, e corev1.EnvVar, env map[string]string) (string, error) {
	if e.ValueFrom == nil {
		return expand(e.Value, env), nil
	}
	switch {
	case e.ValueFrom.FieldRef != nil:
		switch e.ValueFrom.FieldRef.FieldPath {
		case "metadata.name":
			return p.name, nil
		case "metadata.namespace":
			return p.namespace, nil
		case "metadata.uid":
			return p.uid, nil
		case "status.podIP":
			return p.ip, nil
		case "spec.serviceAccountName":
			return spec.ServiceAccountName, nil
		}
	case e.ValueFrom.SecretKeyRef != nil:
		s := &corev1.Secret{}
		if err := k.c.Get(ctx, crclient.ObjectKey{Namespace: p.namespace, Name: e.ValueFrom.SecretKeyRef.Name}, s); err != nil {
			return "", fmt.Errorf("pod %s: env %s: %w", p.name, e.Name, err)
		}
		return string(s.Data[e.ValueFrom.SecretKeyRef.Key]), nil
	}
	return "", fmt.Errorf("pod %s: container %s: env %s: this valueFrom is not run", p.name, c.Name, e.Name)
}

// expand replaces $(VAR) with env's VAR, as the kubelet does; $$ is a
// literal $ and an unknown reference stays as written.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func expandAll(in []string, env map[string]string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, env)
	}
	return out
}

// endpoints points every Service with a selector and ports at the IPs of
// the pods it selects, with an EndpointSlice and an Endpoints, as the
// endpoint controllers would for ready pods.
func (k *kubelet) endpoints(ctx context.Context) error {
	services := &corev1.ServiceList{}
	if err := k.c.List(ctx, services); err != nil {
		return fmt.Errorf("failed to list Services: %w", err)
	}
	for _, s := range services.Items {
		if len(s.Spec.Selector) == 0 || len(s.Spec.Ports) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(s.Spec.Selector)
		var ips []string
		var ports []corev1.ContainerPort
		for _, p := range k.pods {
			if p.namespace == s.Namespace && sel.Matches(labels.Set(p.labels)) {
				ips = append(ips, p.ip)
				d := &appsv1.Deployment{}
				if err := k.c.Get(ctx, crclient.ObjectKey{Namespace: p.namespace, Name: p.deployment}, d); err == nil {
					for _, c := range d.Spec.Template.Spec.Containers {
						ports = append(ports, c.Ports...)
					}
				}
			}
		}
		var slicePorts []discoveryv1.EndpointPort
		var epPorts []corev1.EndpointPort
		for _, sp := range s.Spec.Ports {
			target := sp.TargetPort.IntVal
			if sp.TargetPort.StrVal != "" {
				for _, cp := range ports {
					if cp.Name == sp.TargetPort.StrVal {
						target = cp.ContainerPort
					}
				}
			}
			if target == 0 {
				target = sp.Port
			}
			slicePorts = append(slicePorts, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(target), Protocol: ptr.To(sp.Protocol)})
			epPorts = append(epPorts, corev1.EndpointPort{Name: sp.Name, Port: target, Protocol: sp.Protocol})
		}
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name + "-podbypod"}}
		if _, err := controllerutil.CreateOrUpdate(ctx, k.c, slice, func() error {
			slice.Labels = map[string]string{discoveryv1.LabelServiceName: s.Name, discoveryv1.LabelManagedBy: "podbypod.capi-monolith.dev"}
			slice.AddressType = discoveryv1.AddressTypeIPv4
			slice.Ports = slicePorts
			slice.Endpoints = nil
			for _, ip := range ips {
				slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
					Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				})
			}
			return nil
		}); err != nil {
			return fmt.Errorf("failed to write the EndpointSlice of Service %s/%s: %w", s.Namespace, s.Name, err)
		}
		ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, k.c, ep, func() error {
			ep.Subsets = nil
			if len(ips) > 0 {
				sub := corev1.EndpointSubset{Ports: epPorts}
				for _, ip := range ips {
					sub.Addresses = append(sub.Addresses, corev1.EndpointAddress{IP: ip})
				}
				ep.Subsets = []corev1.EndpointSubset{sub}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("failed to write the Endpoints of Service %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}

// containerStates reports every pod container that is not running, with
// its last log lines.
func (k *kubelet) notRunning(ctx context.Context) []string {
	var out []string
	for _, p := range k.pods {
		for _, id := range p.containers {
			ins, err := k.d.c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			if ins.Container.State == nil || !ins.Container.State.Running {
				out = append(out, fmt.Sprintf("%s exited: %s", ins.Container.Name, k.d.logs(ctx, id)))
			}
		}
	}
	return out
}
