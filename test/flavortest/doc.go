// Package flavortest turns a rendered cluster template into what the
// project's own docker tests can run.
//
// The templates use Cluster API's kubeadm providers, and the docker backend
// executes their bootstrap data: kubeadm runs in the node container, which
// needs a Kubernetes node image (kindest/node) and privileged containers.
// The machines that run the tests have neither, and no registry; the tests
// run a small image of their own (`make docker-test-images`). WithoutKubeadm
// swaps the kubeadm objects of a rendered flavor for test-only ones that
// such an image can run: one cloud-config Secret writing Cluster API's
// bootstrap sentinel, and the control plane as a MachineDeployment of
// machines labelled control-plane. Everything else (the Cluster, the
// Monolith* objects, the workers) stays as the template made it.
package flavortest
