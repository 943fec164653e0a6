// Package v1alpha1 contains the toolplane.io/v1alpha1 API: the ToolSet.
//
// It depends only on the standard library and k8s.io/apimachinery, so that
// clients can import it cheaply.
//
// +kubebuilder:object:generate=true
// +groupName=toolplane.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "toolplane.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this API with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ToolSet{}, &ToolSetList{}, &ToolNamePolicy{}, &ToolNamePolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
