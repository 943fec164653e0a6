package controllers

import (
	"fmt"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// PlanTools is what the reconciler makes of one spec document for a
// ToolSet: the tools it would offer (valid, let through by include and
// exclude, under their published names, with schemaDigest) and those it
// would reject, each with its state and reason. An error means the operator
// would refuse the whole document, as a failed scrape. Ownership and policy
// are not applied. `kubectl toolplane lint` calls it, so that a lint and
// the operator validate alike; parse the document with ParseDocument. The
// endpoints are those of DefaultClusterDomain.
func PlanTools(ts *v1alpha1.ToolSet, doc *spec.Document) (offered []spec.TableTool, rejected []v1alpha1.ToolStatus, err error) {
	if err := checkToolCount(ts.Spec.Limits, doc); err != nil {
		return nil, nil, err
	}
	a := assemble(ts, []*spec.Document{doc}, 0, "")
	return a.tools, a.rejected, nil
}

// checkToolCount refuses a document of more tools than limits.maxTools.
func checkToolCount(limits v1alpha1.Limits, doc *spec.Document) error {
	if limits.MaxTools > 0 && len(doc.Tools) > int(limits.MaxTools) {
		return fmt.Errorf("%d tools, more than limits.maxTools %d", len(doc.Tools), limits.MaxTools)
	}
	return nil
}
