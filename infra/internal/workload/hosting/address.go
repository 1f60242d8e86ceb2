package hosting

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// validateAddresses checks the listen address and the advertised host, and
// defaults the latter to the former.
func validateAddresses(opts *Options) error {
	if !opts.Address.IsValid() {
		return fmt.Errorf("the workload API address must be an IP address, not %q", opts.Address)
	}
	if opts.AdvertiseHost == "" {
		if opts.Address.IsUnspecified() {
			return fmt.Errorf("the workload API listens on %s, which clients cannot dial: an advertised host is required with it", opts.Address)
		}
		opts.AdvertiseHost = opts.Address.String()
		return nil
	}
	return ValidateAdvertiseHost(opts.AdvertiseHost)
}

// ValidateAdvertiseHost accepts an IP address clients can dial or a DNS
// name (RFC 1123 subdomain): the host of a control plane endpoint.
func ValidateAdvertiseHost(host string) error {
	if a, err := netip.ParseAddr(host); err == nil {
		if a.IsUnspecified() || a.Zone() != "" {
			return fmt.Errorf("%s is not an address clients can dial", host)
		}
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(strings.TrimSuffix(host, ".")); len(errs) > 0 {
		return fmt.Errorf("%q is neither an IP address nor a DNS name: %s", host, strings.Join(errs, "; "))
	}
	return nil
}

// certificateHosts are the names a serving certificate holds: the
// advertised host, the listen address when it is a specific other one
// (a client of the pod's IP), and localhost on loopback.
func (h *Hosting) certificateHosts() []string {
	hosts := []string{h.opts.AdvertiseHost}
	if a := h.opts.Address; !a.IsUnspecified() && a.String() != h.opts.AdvertiseHost {
		hosts = append(hosts, a.String())
	}
	if h.opts.Address.IsLoopback() {
		hosts = append(hosts, "localhost")
	}
	return hosts
}
