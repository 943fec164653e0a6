package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ToolNamePolicySpec reserves tool names for namespaces.
// +kubebuilder:validation:XValidation:rule="(has(self.namespaces) && size(self.namespaces) > 0) || has(self.namespaceSelector)",message="set namespaces, namespaceSelector or both"
type ToolNamePolicySpec struct {
	// names are globs over published tool names (after a ToolSet's prefix),
	// in path.Match syntax with '*' and '?' only, such as "refund" or
	// "payments_*". A published name that any of them matches may be owned
	// only by a ToolSet in one of the permitted namespaces; everywhere else
	// the tool is Denied, whatever the order of the claims.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_.*?-]+$`
	Names []string `json:"names"`

	// namespaces are the namespaces whose ToolSets may own the names.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceSelector selects more namespaces, by their labels, whose
	// ToolSets may own the names; they add to namespaces. An empty selector
	// ({}) selects every namespace, which reserves nothing; left out, it
	// selects none. Anyone who may label a namespace can move it in or out:
	// prefer namespaces, or labels only cluster admins set.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// ToolNamePolicyStatus is what the operator last observed of a policy.
type ToolNamePolicyStatus struct {
	// observedGeneration is the generation of the spec that this status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// governedTools is how many tools, claimed by any ToolSet in the
	// cluster, the policy's names match now, Denied ones included.
	// +optional
	GovernedTools int32 `json:"governedTools,omitempty"`

	// deniedTools is how many of those the policy denies: tools of ToolSets
	// outside the permitted namespaces.
	// +optional
	DeniedTools int32 `json:"deniedTools,omitempty"`

	// conditions summarise the policy. Ready is True once the policy is in
	// force.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// ToolNamePolicy reserves published tool names for the ToolSets of some
// namespaces, so that no other namespace can squat them, whatever the order
// of the claims. It is cluster-scoped and meant for cluster admins only: the
// operator's roles never aggregate it into edit or admin. Names no policy
// matches keep the first-claim rule.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tnp,categories={toolplane}
// +kubebuilder:printcolumn:name="Names",type=string,JSONPath=`.spec.names`
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`
// +kubebuilder:printcolumn:name="Selector",type=string,JSONPath=`.spec.namespaceSelector`,priority=1
// +kubebuilder:printcolumn:name="Governed",type=integer,JSONPath=`.status.governedTools`
// +kubebuilder:printcolumn:name="Denied",type=integer,JSONPath=`.status.deniedTools`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ToolNamePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which names are reserved, and for which namespaces.
	// +required
	Spec ToolNamePolicySpec `json:"spec"`

	// status is what the operator last observed.
	// +optional
	Status ToolNamePolicyStatus `json:"status,omitempty"`
}

// ToolNamePolicyList is a list of ToolNamePolicies.
// +kubebuilder:object:root=true
type ToolNamePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ToolNamePolicy `json:"items"`
}
