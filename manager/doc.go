// Package manager builds the one controller-runtime manager that every
// enabled module of capi-monolith shares: one scheme, one cache (one informer
// per type however many modules read it), one client, one metrics and
// diagnostics endpoint, one health endpoint, one leader election and one
// webhook server.
//
// main.go binds Options to the command line and calls New; tests call New
// with an envtest configuration, so that they run the same wiring as the
// binary.
package manager
