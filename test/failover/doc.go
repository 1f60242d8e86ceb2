// Package failover runs two capi-monolith processes as two replicas of the
// infrastructure provider, against one apiserver, on distinct loopback
// addresses standing for their pods' IPs: the follower forwards the
// workload API to the leader, and takes over every cluster when the leader
// is SIGKILLed. The failover time is printed, not asserted.
package failover
