package controllers

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/toolplane/toolplane/api/v1alpha1"
)

// statusEqual reports whether two statuses are semantically equal, as
// equality.Semantic.DeepEqual does. Most reconciles change nothing, and
// reflect.DeepEqual tells that an order of magnitude faster: values it
// finds equal are semantically equal too. Only statuses it tells apart
// (one changed, or times equal but in another location) take the semantic
// comparison.
func statusEqual(a, b *v1alpha1.ToolSetStatus) bool {
	return reflect.DeepEqual(a, b) || equality.Semantic.DeepEqual(a, b)
}
