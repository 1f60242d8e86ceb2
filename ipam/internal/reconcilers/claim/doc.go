// Package claim reconciles Cluster API IPAddressClaims that name one of the
// ipam module's pools: it allocates an address from the pool's ledger,
// creates the IPAddress, reports the claim's Ready condition, re-creates an
// IPAddress deleted while its claim lives, and releases the address when the
// claim goes.
package claim
