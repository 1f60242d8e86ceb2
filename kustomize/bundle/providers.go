package bundle

// ProviderName is the name of every capi-monolith provider in clusterctl:
// the three provider types share it (clusterctl allows one name across
// types), so that `--infrastructure monolith --ipam monolith
// --runtime-extension monolith` installs them all.
const ProviderName = "monolith"

// Contract is the Cluster API contract every release series implements.
const Contract = "v1beta2"

// Provider is one clusterctl provider type the binary is packaged as.
type Provider struct {
	// Overlay is the folder under kustomize/overlays it is built from.
	Overlay string
	// Type is clusterctl's provider type, as clusterctl.yaml spells it.
	Type string
	// Label is clusterctl's <type>-<name>: the repository folder and the
	// cluster.x-k8s.io/provider label.
	Label string
	// Namespace is the namespace its components are installed in (the
	// overlay's), where clusterctl records it in its inventory.
	Namespace string
	// ComponentsFile is the name clusterctl looks for in the version folder.
	ComponentsFile string
	// Modules are the --enable-modules of its Deployment.
	Modules []string
	// Templates says whether the workload cluster templates and ClusterClass
	// definitions ship with it (only the infrastructure provider's do).
	Templates bool
	// Docker is the same components with the node's Docker socket mounted
	// (kustomize/components/docker-socket), for the docker backend; nil
	// when the provider has none. The socket is a hostPath volume, which no
	// clusterctl variable can remove, so the default components go without
	// it and run under the restricted Pod Security Standard.
	Docker *Variant
}

// Variant is another components file of a provider, in the same version
// folder, built from an overlay of its own.
type Variant struct {
	// Overlay is the folder under kustomize/overlays it is built from.
	Overlay string
	// ComponentsFile is its name in the version folder (the output folder
	// for the all-in-one file).
	ComponentsFile string
}

// AllInOne is the overlay with every module in one Deployment, for dev
// management clusters; it is no clusterctl provider.
var AllInOne = Provider{
	Overlay:   "all-in-one",
	Label:     "capi-monolith",
	Namespace: "capi-monolith",
	Modules:   []string{"infra", "machinepool", "ipam", "runtimeext"},
	Docker:    &Variant{Overlay: "all-in-one-docker", ComponentsFile: AllInOneDockerFile},
}

// AllInOneFile is the all-in-one file's name in the output folder.
const AllInOneFile = "capi-monolith-all-in-one.yaml"

// AllInOneDockerFile is the all-in-one file with the Docker socket mounted.
const AllInOneDockerFile = "capi-monolith-all-in-one-docker.yaml"

// Providers are the clusterctl provider types, in the order clusterctl.yaml
// lists them.
var Providers = []Provider{
	{
		Overlay:        "infrastructure",
		Type:           "InfrastructureProvider",
		Label:          "infrastructure-" + ProviderName,
		Namespace:      "capi-monolith-infrastructure",
		ComponentsFile: "infrastructure-components.yaml",
		Modules:        []string{"infra", "machinepool"},
		Templates:      true,
		Docker:         &Variant{Overlay: "infrastructure-docker", ComponentsFile: "infrastructure-components-docker.yaml"},
	},
	{
		Overlay:        "ipam",
		Type:           "IPAMProvider",
		Label:          "ipam-" + ProviderName,
		Namespace:      "capi-monolith-ipam",
		ComponentsFile: "ipam-components.yaml",
		Modules:        []string{"ipam"},
	},
	{
		Overlay:        "runtime-extension",
		Type:           "RuntimeExtensionProvider",
		Label:          "runtime-extension-" + ProviderName,
		Namespace:      "capi-monolith-runtime-extension",
		ComponentsFile: "runtime-extension-components.yaml",
		Modules:        []string{"runtimeext"},
	},
}
