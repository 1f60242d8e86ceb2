package flavortest

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	kubeadmControlPlane   = "KubeadmControlPlane"
	kubeadmConfigTemplate = "KubeadmConfigTemplate"
	kubeadmConfig         = "KubeadmConfig"

	clusterNameLabel    = "cluster.x-k8s.io/cluster-name"
	deploymentNameLabel = "cluster.x-k8s.io/deployment-name"
	controlPlaneLabel   = "cluster.x-k8s.io/control-plane"
	moveLabel           = "clusterctl.cluster.x-k8s.io/move"

	// bootstrapData only writes the sentinel: the test node image has no
	// kubelet or kubeadm to run.
	bootstrapData = `#cloud-config
write_files:
- path: /run/cluster-api/bootstrap-success.complete
  content: success
`
)

// BootstrapSecretName is the name of the test bootstrap Secret
// WithoutKubeadm adds for a cluster.
func BootstrapSecretName(cluster string) string { return cluster + "-test-bootstrap" }

// ControlPlaneDeploymentName is the name of the MachineDeployment that
// WithoutKubeadm makes of a cluster's KubeadmControlPlane.
func ControlPlaneDeploymentName(cluster string) string { return cluster + "-control-plane" }

// WithoutKubeadm returns objs (a rendered flavor with one Cluster and
// one KubeadmControlPlane) without their kubeadm objects: the Cluster
// loses its controlPlaneRef, the KubeadmControlPlane becomes a
// MachineDeployment (ControlPlaneDeploymentName) of as many machines
// labelled control-plane, from the same MonolithMachineTemplate and
// version, and every MachineDeployment and MachinePool takes its bootstrap
// data from the Secret BootstrapSecretName, added right after the Cluster.
// KubeadmConfigTemplates and KubeadmConfigs are dropped. objs is not
// changed.
func WithoutKubeadm(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var cluster, kcp *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Cluster":
			cluster = o
		case kubeadmControlPlane:
			kcp = o
		}
	}
	if cluster == nil || kcp == nil {
		return nil, fmt.Errorf("want a Cluster and a %s among the objects", kubeadmControlPlane)
	}
	name, namespace := cluster.GetName(), cluster.GetNamespace()
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name":      BootstrapSecretName(name),
			"namespace": namespace,
			// No Cluster owns it: the move label takes it along.
			"labels": map[string]any{clusterNameLabel: name, moveLabel: ""},
		},
		"type":       "cluster.x-k8s.io/secret",
		"stringData": map[string]any{"format": "cloud-config", "value": bootstrapData},
	}}
	controlPlane, err := controlPlaneDeployment(kcp, name, namespace)
	if err != nil {
		return nil, err
	}

	var out []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case kubeadmConfigTemplate, kubeadmConfig:
			continue
		case kubeadmControlPlane:
			out = append(out, controlPlane)
			continue
		}
		o = o.DeepCopy()
		switch o.GetKind() {
		case "Cluster":
			unstructured.RemoveNestedField(o.Object, "spec", "controlPlaneRef")
			out = append(out, o, secret)
			continue
		case "MachineDeployment", "MachinePool":
			if err := unstructured.SetNestedField(o.Object, map[string]any{"dataSecretName": BootstrapSecretName(name)},
				"spec", "template", "spec", "bootstrap"); err != nil {
				return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// controlPlaneDeployment is the MachineDeployment standing in for kcp.
func controlPlaneDeployment(kcp *unstructured.Unstructured, cluster, namespace string) (*unstructured.Unstructured, error) {
	replicas, found, err := unstructured.NestedFieldCopy(kcp.Object, "spec", "replicas")
	if err != nil || !found {
		return nil, fmt.Errorf("%s %s has no spec.replicas (%v)", kubeadmControlPlane, kcp.GetName(), err)
	}
	version, _, err := unstructured.NestedString(kcp.Object, "spec", "version")
	if err != nil {
		return nil, fmt.Errorf("%s %s: spec.version: %w", kubeadmControlPlane, kcp.GetName(), err)
	}
	infra, found, err := unstructured.NestedMap(kcp.Object, "spec", "machineTemplate", "spec", "infrastructureRef")
	if err != nil || !found {
		return nil, fmt.Errorf("%s %s has no machine infrastructureRef (%v)", kubeadmControlPlane, kcp.GetName(), err)
	}
	name := ControlPlaneDeploymentName(cluster)
	selector := map[string]any{clusterNameLabel: cluster, deploymentNameLabel: name}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2",
		"kind":       "MachineDeployment",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"clusterName": cluster,
			"replicas":    replicas,
			"selector":    map[string]any{"matchLabels": selector},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{
					clusterNameLabel: cluster, deploymentNameLabel: name, controlPlaneLabel: "",
				}},
				"spec": map[string]any{
					"clusterName":       cluster,
					"version":           version,
					"bootstrap":         map[string]any{"dataSecretName": BootstrapSecretName(cluster)},
					"infrastructureRef": infra,
				},
			},
		},
	}}, nil
}
