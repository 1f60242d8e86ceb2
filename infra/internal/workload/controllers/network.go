package controllers

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Defaults of the cluster network when kubeadm-config names none: kubeadm's
// service subnet, and the pod network Flannel's manifests assume.
var (
	defaultServiceCIDR = netip.MustParsePrefix("10.96.0.0/12")
	defaultPodCIDR     = netip.MustParsePrefix("10.244.0.0/16")
)

// network is the cluster's service and pod CIDRs, as kube-apiserver's
// --service-cluster-ip-range and kube-controller-manager's --cluster-cidr
// have them from kubeadm's ClusterConfiguration (which Cluster API's kubeadm
// bootstrap provider fills from the Cluster's spec.clusterNetwork).
type network struct {
	services, pods netip.Prefix
}

// network reads the kubeadm-config ConfigMap once it exists; until then
// (or in a cluster kubeadm did not make) the defaults hold, and known is
// false.
func (c *Cluster) network() (n network, known bool) {
	c.netMu.Lock()
	if c.net != nil {
		defer c.netMu.Unlock()
		return *c.net, true
	}
	c.netMu.Unlock()
	n = network{services: defaultServiceCIDR, pods: defaultPodCIDR}
	// Read without netMu: the observer takes it under the store's lock.
	cm, err := c.store.Get(configMaps, metav1.NamespaceSystem, kubeadmConfigName)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			c.m.opts.Log.Error(err, "Failed to read kubeadm-config", "cluster", c.name)
		}
		return n, false
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "ClusterConfiguration")
	var cc struct {
		Networking struct {
			PodSubnet     string `json:"podSubnet"`
			ServiceSubnet string `json:"serviceSubnet"`
		} `json:"networking"`
	}
	if err := yaml.Unmarshal([]byte(data), &cc); err != nil {
		c.m.opts.Log.Error(err, "Failed to read the ClusterConfiguration of kubeadm-config; using the default networks", "cluster", c.name)
	}
	if p, err := firstPrefix(cc.Networking.ServiceSubnet); err == nil {
		n.services = p
	}
	if p, err := firstPrefix(cc.Networking.PodSubnet); err == nil {
		n.pods = p
	}
	c.netMu.Lock()
	c.net = &n
	c.netMu.Unlock()
	return n, true
}

// kubeadmConfigName is the ConfigMap kubeadm uploads its configuration to.
const kubeadmConfigName = "kubeadm-config"

// firstPrefix parses the first CIDR of a comma-separated list (the
// primary family of a dual-stack cluster).
func firstPrefix(s string) (netip.Prefix, error) {
	first := strings.TrimSpace(strings.Split(s, ",")[0])
	if first == "" {
		return netip.Prefix{}, fmt.Errorf("no CIDR")
	}
	p, err := netip.ParsePrefix(first)
	if err != nil {
		return netip.Prefix{}, err
	}
	return p.Masked(), nil
}

// nthAddr is the n-th address of a prefix (0 is the network address), and
// false past its end.
func nthAddr(p netip.Prefix, n uint64) (netip.Addr, bool) {
	return offsetAddr(p, new(big.Int).SetUint64(n))
}

func offsetAddr(p netip.Prefix, off *big.Int) (netip.Addr, bool) {
	a := p.Addr().AsSlice()
	v := new(big.Int).SetBytes(a)
	v.Add(v, off)
	b := v.Bytes()
	if len(b) > len(a) {
		return netip.Addr{}, false
	}
	out := make([]byte, len(a))
	copy(out[len(a)-len(b):], b)
	addr, _ := netip.AddrFromSlice(out)
	return addr, p.Contains(addr)
}

// size is how many addresses a prefix holds, capped: enough to find a free one.
func size(p netip.Prefix) uint64 {
	host := p.Addr().BitLen() - p.Bits()
	if host >= 20 {
		return 1 << 20
	}
	return 1 << host
}

// subnet is the i-th sub-prefix of bits bits inside p, and false past its end.
func subnet(p netip.Prefix, bits int, i uint64) (netip.Prefix, bool) {
	if bits < p.Bits() || bits > p.Addr().BitLen() {
		return netip.Prefix{}, false
	}
	off := new(big.Int).Lsh(new(big.Int).SetUint64(i), uint(p.Addr().BitLen()-bits))
	addr, ok := offsetAddr(p, off)
	if !ok {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(addr, bits), true
}
