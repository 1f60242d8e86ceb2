// Package image tests the manager image (make image) the way clusterctl
// installs it: for each provider type it renders the bundle with clusterctl's
// library, starts the image with `docker run` on the host network with the
// Deployment's own args, environment, user, groups and security context, the
// serving certificate and a kubeconfig mounted, against an envtest apiserver
// with the bundle's CRDs and webhook configurations, and checks that the
// container becomes ready, serves its webhooks and reconciles an object (the
// infrastructure one through the Docker Engine on the mounted socket).
//
// It needs the image (CAPI_MONOLITH_TEST_IMAGE, default capi-monolith:dev;
// make test builds it first), the Docker Engine and the images of make
// docker-test-images: without them it fails.
package image
