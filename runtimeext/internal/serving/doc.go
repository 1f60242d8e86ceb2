// Package serving builds the one webhook server of the manager when the
// runtimeext module is enabled: Cluster API's exp/runtime/server (discovery,
// path routing, TLS with a hot-reloaded certificate), which embeds
// controller-runtime's webhook server and so also serves every module's
// admission webhooks, wrapped with what it lacks for the Runtime SDK paths:
//
//   - 405 for anything but POST, 413 for oversized bodies, 400 for malformed
//     JSON or a request of the wrong apiVersion/kind, before any handler runs;
//   - a deadline taken from the ?timeout= query Cluster API sends (at most
//     MaxTimeout, 30 s; more answers 400), minus a margin, after which the
//     call answers 504 (so that Cluster API applies the handler's
//     failurePolicy) instead of letting the client time out, and the
//     handler's context is cancelled;
//   - panic recovery that answers a Failure response with a fixed message;
//   - a discovery response sorted by handler name;
//   - optional mTLS: with a client CA, hook paths require a client
//     certificate it signed, while admission webhook paths stay as they are.
//
// The wrapping happens around the upstream server, not instead of it: the
// embedded webhook.Server is replaced by a guard that wraps each handler as
// the upstream server registers it.
package serving
