package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/capi-monolith/capi-monolith/ipam/api/v1alpha1"
	"github.com/capi-monolith/capi-monolith/ipam/internal/allocator"
	"github.com/capi-monolith/capi-monolith/ipam/internal/index"
)

// maxListed caps how many addresses or ranges one message lists.
const maxListed = 10

var specPath = field.NewPath("spec")

var errNoClient = errors.New("the pool validator has no Client")

func parseSpec(spec *v1alpha1.IPPoolSpec) (*allocator.Pool, error) {
	return allocator.Parse(allocator.Spec{
		Addresses:                   spec.Addresses,
		Prefix:                      int(spec.Prefix),
		Gateway:                     spec.Gateway,
		ExcludedAddresses:           spec.ExcludedAddresses,
		AllocateReservedIPAddresses: spec.AllocateReservedIPAddresses,
	})
}

// validateSpec parses the spec and reports every problem against its field.
// The pool is nil when the list is not empty.
func validateSpec(spec *v1alpha1.IPPoolSpec) (*allocator.Pool, field.ErrorList) {
	var errs field.ErrorList
	// The CRD has the same minimum; the check stays for servers where the
	// schema was not applied and for direct callers.
	if spec.AddressReuseGracePeriodSeconds < 0 {
		errs = append(errs, field.Invalid(specPath.Child("addressReuseGracePeriodSeconds"),
			spec.AddressReuseGracePeriodSeconds, "must be greater than or equal to 0"))
	}
	pool, err := parseSpec(spec)
	if err != nil {
		errs = append(errs, parseErrors(spec, err)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return pool, nil
}

// parseErrors turns allocator.Parse's joined errors into field errors.
func parseErrors(spec *v1alpha1.IPPoolSpec, err error) field.ErrorList {
	all := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		all = joined.Unwrap()
	}
	var errs field.ErrorList
	for _, e := range all {
		var fe *allocator.FieldError
		if !errors.As(e, &fe) {
			errs = append(errs, field.Invalid(specPath, field.OmitValueType{}, e.Error()))
			continue
		}
		path := specPath.Child(fe.Field)
		if fe.Index >= 0 {
			path = path.Index(fe.Index)
		}
		switch {
		case errors.Is(fe.Err, allocator.ErrNoAddresses):
			errs = append(errs, field.Required(path, fe.Err.Error()))
		case fe.Field == "prefix":
			errs = append(errs, field.Invalid(path, spec.Prefix, fe.Err.Error()))
		case fe.Value != "":
			errs = append(errs, field.Invalid(path, fe.Value, fe.Err.Error()))
		default:
			errs = append(errs, field.Invalid(path, field.OmitValueType{}, fe.Err.Error()))
		}
	}
	return errs
}

// checkOverlap compares the pool's allocatable addresses with those of every
// other pool of both kinds. Overlap within baseline (addresses the pool
// already had) is only warned about; so is every overlap when the pool
// allows overlapping. Other pools that do not parse are skipped: they hand
// out nothing.
func (v *PoolValidator) checkOverlap(ctx context.Context, pool v1alpha1.Pool, parsed *allocator.Pool, baseline *netipx.IPSet) (admission.Warnings, field.ErrorList, error) {
	others, err := v.otherPools(ctx, pool)
	if err != nil {
		return nil, nil, err
	}
	allowed := allowsOverlap(pool)
	var warnings admission.Warnings
	var errs field.ErrorList
	for _, other := range others {
		otherParsed, err := parseSpec(other.GetSpec())
		if err != nil || !parsed.IPSet().Overlaps(otherParsed.IPSet()) {
			continue
		}
		overlap, err := intersect(parsed.IPSet(), otherParsed.IPSet())
		if err != nil {
			return nil, nil, err
		}
		fresh := overlap
		if baseline != nil {
			if fresh, err = subtract(overlap, baseline); err != nil {
				return nil, nil, err
			}
		}
		switch {
		case allowed:
			warnings = append(warnings, fmt.Sprintf("spec.addresses overlap %s at %s, allowed by the annotation %s",
				describeFor(pool, other), formatRanges(overlap), v1alpha1.AllowOverlapAnnotation))
			continue
		case len(fresh.Ranges()) == 0:
			warnings = append(warnings, fmt.Sprintf("spec.addresses overlap %s at %s; the overlap predates this change and is kept",
				describeFor(pool, other), formatRanges(overlap)))
			continue
		}
		errs = append(errs, field.Forbidden(specPath.Child("addresses"), fmt.Sprintf(
			"overlaps %s at %s; set the annotation %s: \"true\" to allow overlapping pools",
			describeFor(pool, other), formatRanges(fresh), v1alpha1.AllowOverlapAnnotation)))
	}
	return warnings, errs, nil
}

// otherPools lists the pools of both kinds in every namespace, except pool
// itself, in a stable order so that messages are too.
func (v *PoolValidator) otherPools(ctx context.Context, pool v1alpha1.Pool) ([]v1alpha1.Pool, error) {
	if v.Client == nil {
		return nil, errNoClient
	}
	self := index.KeyOf(pool)
	var out []v1alpha1.Pool
	keep := func(p v1alpha1.Pool) {
		if index.KeyOf(p) != self {
			out = append(out, p)
		}
	}
	namespaced := &v1alpha1.MonolithIPPoolList{}
	if err := v.Client.List(ctx, namespaced); err != nil {
		return nil, fmt.Errorf("failed to list %ss: %w", v1alpha1.MonolithIPPoolKind, err)
	}
	for i := range namespaced.Items {
		keep(&namespaced.Items[i])
	}
	global := &v1alpha1.GlobalMonolithIPPoolList{}
	if err := v.Client.List(ctx, global); err != nil {
		return nil, fmt.Errorf("failed to list %ss: %w", v1alpha1.GlobalMonolithIPPoolKind, err)
	}
	for i := range global.Items {
		keep(&global.Items[i])
	}
	slices.SortFunc(out, func(a, b v1alpha1.Pool) int {
		return strings.Compare(index.KeyOf(a).String(), index.KeyOf(b).String())
	})
	return out, nil
}

// checkStranded reports the allocated addresses that the new spec no longer
// contains. Addresses the old spec did not contain either were stranded
// before this change and do not block it.
func (v *PoolValidator) checkStranded(ctx context.Context, pool v1alpha1.Pool, oldParsed, parsed *allocator.Pool) (field.ErrorList, error) {
	addrs, err := v.addressesOf(ctx, pool)
	if err != nil {
		return nil, err
	}
	var stranded []netip.Addr
	for _, ip := range addrs {
		if parsed.Contains(ip) || (oldParsed != nil && !oldParsed.Contains(ip)) {
			continue
		}
		stranded = append(stranded, ip)
	}
	if len(stranded) == 0 {
		return nil, nil
	}
	slices.SortFunc(stranded, netip.Addr.Compare)
	stranded = slices.Compact(stranded)
	return field.ErrorList{field.Forbidden(specPath, fmt.Sprintf(
		"the change leaves %d allocated %s outside the pool's allocatable addresses: %s; "+
			"release them (delete their IPAddressClaims) first",
		len(stranded), map[bool]string{true: "IPAddress", false: "IPAddresses"}[len(stranded) == 1], formatAddrs(stranded)))}, nil
}

// addressesOf returns the pool's allocated addresses: those of its
// IPAddresses and of its live allocation records. The records are
// cluster-scoped, so a manager watching some namespaces still sees every
// address of a global pool.
func (v *PoolValidator) addressesOf(ctx context.Context, pool v1alpha1.Pool) ([]netip.Addr, error) {
	if v.Client == nil {
		return nil, errNoClient
	}
	key := index.KeyOf(pool).String()
	addrs := &ipamv1.IPAddressList{}
	if err := v.Client.List(ctx, addrs, client.MatchingFields{index.IPAddressPoolField: key}); err != nil {
		return nil, fmt.Errorf("failed to list the IPAddresses of %s: %w", describe(pool), err)
	}
	recs := &v1alpha1.MonolithIPAllocationList{}
	if err := v.Client.List(ctx, recs, client.MatchingFields{index.AllocationPoolField: key}); err != nil {
		return nil, fmt.Errorf("failed to list the allocation records of %s: %w", describe(pool), err)
	}
	seen := map[netip.Addr]struct{}{}
	var out []netip.Addr
	add := func(s string) {
		if ip, err := netip.ParseAddr(s); err == nil {
			if _, ok := seen[ip]; !ok {
				seen[ip] = struct{}{}
				out = append(out, ip)
			}
		}
	}
	for i := range addrs.Items {
		add(addrs.Items[i].Spec.Address)
	}
	for i := range recs.Items {
		if !recs.Items[i].IsReleased() {
			add(recs.Items[i].Spec.Address)
		}
	}
	return out, nil
}

// liveRecordCount counts the pool's allocation records that hold an
// address (not released ones cooling down).
func (v *PoolValidator) liveRecordCount(ctx context.Context, pool v1alpha1.Pool) (int, error) {
	if v.Client == nil {
		return 0, errNoClient
	}
	recs := &v1alpha1.MonolithIPAllocationList{}
	if err := v.Client.List(ctx, recs, client.MatchingFields{index.AllocationPoolField: index.KeyOf(pool).String()}); err != nil {
		return 0, fmt.Errorf("failed to list the allocation records of %s: %w", describe(pool), err)
	}
	n := 0
	for i := range recs.Items {
		if !recs.Items[i].IsReleased() {
			n++
		}
	}
	return n, nil
}

func intersect(a, b *netipx.IPSet) (*netipx.IPSet, error) {
	var sb netipx.IPSetBuilder
	sb.AddSet(a)
	sb.Intersect(b)
	s, err := sb.IPSet()
	if err != nil {
		return nil, fmt.Errorf("failed to intersect address sets: %w", err)
	}
	return s, nil
}

func subtract(a, b *netipx.IPSet) (*netipx.IPSet, error) {
	var sb netipx.IPSetBuilder
	sb.AddSet(a)
	sb.RemoveSet(b)
	s, err := sb.IPSet()
	if err != nil {
		return nil, fmt.Errorf("failed to subtract address sets: %w", err)
	}
	return s, nil
}

// formatRanges writes a set as "10.0.0.0/28, 10.0.1.5-10.0.1.9, 10.0.2.1",
// listing at most maxListed ranges.
func formatRanges(s *netipx.IPSet) string {
	ranges := s.Ranges()
	parts := make([]string, 0, min(len(ranges), maxListed))
	for _, r := range ranges[:min(len(ranges), maxListed)] {
		switch p, ok := r.Prefix(); {
		case r.From() == r.To():
			parts = append(parts, r.From().String())
		case ok:
			parts = append(parts, p.String())
		default:
			parts = append(parts, r.String())
		}
	}
	return joinCapped(parts, len(ranges), "ranges")
}

func formatAddrs(addrs []netip.Addr) string {
	parts := make([]string, 0, min(len(addrs), maxListed))
	for _, a := range addrs[:min(len(addrs), maxListed)] {
		parts = append(parts, a.String())
	}
	return joinCapped(parts, len(addrs), "addresses")
}

func joinCapped(parts []string, total int, noun string) string {
	out := strings.Join(parts, ", ")
	if rest := total - len(parts); rest > 0 {
		out += fmt.Sprintf(" and %d more %s", rest, noun)
	}
	return out
}
