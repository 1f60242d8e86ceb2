// Package allocator holds the IP arithmetic of the in-cluster IPAM provider,
// kept free of Kubernetes types so that the webhook, the controller and the
// tests share one definition of what a pool contains.
//
// Parse turns a pool spec (addresses, prefix, gateway, exclusions) into a
// Pool: the set of addresses that may be handed out. Allocator tracks which
// of those addresses are taken and finds the lowest free one without
// scanning, so that pools as large as an IPv6 /64 cost memory in proportion
// to the number of allocations, never to the size of the pool.
package allocator
