package machines

import "github.com/capi-monolith/capi-monolith/infra/internal/backend/docker"

// The docker backend's marks on what it creates: the contract by which
// people, scripts and tests find a cluster's containers on the host.
const (
	DockerLabelClusterNamespace = docker.LabelClusterNamespace
	DockerLabelClusterName      = docker.LabelClusterName
	DockerLabelMachine          = docker.LabelMachine
	DockerLabelRole             = docker.LabelRole
	DockerLabelCreatedBy        = docker.LabelCreatedBy
	DockerRoleWorker            = docker.RoleWorker
	DockerProviderIDPrefix      = docker.ProviderIDPrefix
)
