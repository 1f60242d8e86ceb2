package api

const (
	// HoldAnnotation lists the lifecycle hooks held on a Cluster,
	// comma-separated (for example "BeforeClusterDelete"): each held hook
	// answers with a retry until its name is removed.
	HoldAnnotation = "runtime.capi-monolith.dev/hold"

	// NamespaceOptInLabel is the label a namespace carries ("true") to have
	// its Clusters served by a self-registered ExtensionConfig's default
	// namespace selector.
	NamespaceOptInLabel = "runtime.capi-monolith.dev/enabled"
)
