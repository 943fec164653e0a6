package controllers

// The operator's permissions, least privilege. config/rbac is generated from
// these markers.
//
// Secrets and CA ConfigMaps in ToolSet namespaces are read one object at a
// time through the uncached API reader, so the operator needs only get on
// them: it never lists or watches Secrets, and never holds a cluster-wide
// cache of them. ConfigMaps are written, and leases held, only in the
// operator's own namespace, through a Role. ToolNamePolicies are only read
// (and their status written): they are written by cluster admins alone, and
// no role here aggregates them into edit or admin. Namespaces are read for
// the policies' namespace selectors. Services are read (and cached, trimmed
// to their type and selector) to refuse those that could route outside
// their namespace.
//
// +kubebuilder:rbac:groups=toolplane.io,resources=toolsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=toolplane.io,resources=toolsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=toolplane.io,resources=toolnamepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=toolplane.io,resources=toolnamepolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",namespace=toolplane-system,resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=toolplane-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
