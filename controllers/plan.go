package controllers

import (
	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// PlanTools is what the reconciler makes of one spec document for a
// ToolSet: the tools it would offer (valid, let through by include and
// exclude, under their published names, with schemaDigest) and those it
// would reject, each with its state and reason. Ownership and policy are not
// applied. `kubectl toolplane lint` calls it, so that a lint and the
// operator validate alike.
func PlanTools(ts *v1alpha1.ToolSet, doc *spec.Document) (offered []spec.TableTool, rejected []v1alpha1.ToolStatus) {
	a := assemble(ts, []*spec.Document{doc})
	return a.tools, a.rejected
}
