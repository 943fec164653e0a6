package controllers

import (
	"errors"
	"time"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/credentials"
)

// A ToolSet whose Secret or CA ConfigMap (or a key of one) is missing waits
// for someone else to create it: a sibling in the same apply, an external
// secrets operator. The reconciler does not watch Secrets: a watch needs
// list and watch on every Secret of the watched namespaces, and the
// operator's RBAC grants get alone (see rbac.go), so it reads the one
// Secret a ToolSet names, by name, when it scrapes. Instead, while a
// reference is missing, the ToolSet is looked at again every
// referenceRetry, whatever its own interval: the shortest interval any
// ToolSet may ask for, so that a missing Secret costs no more API reads
// than a ToolSet the ceilings allow.

// referenceRetry is how soon a ToolSet waiting for a Secret or ConfigMap
// is reconciled again: the minimum interval (5s, or --min-interval).
func referenceRetry(c Ceilings) time.Duration {
	return max(c.MinInterval, DefaultMinInterval)
}

// referenceReason is the Ready reason of a ToolSet waiting for m.
func referenceReason(m *credentials.MissingReference) string {
	switch {
	case m.Kind == credentials.KindSecret && m.KeyOnly:
		return v1alpha1.ReasonSecretKeyNotFound
	case m.Kind == credentials.KindSecret:
		return v1alpha1.ReasonSecretNotFound
	case m.KeyOnly:
		return v1alpha1.ReasonConfigMapKeyNotFound
	}
	return v1alpha1.ReasonConfigMapNotFound
}

// credentialReason is the Ready reason of a credential error: one of the
// missing-reference reasons, or InvalidSpec for a value the user must fix
// (an empty token, a CA bundle without a certificate).
func credentialReason(err error) string {
	if m, ok := errors.AsType[*credentials.MissingReference](err); ok {
		return referenceReason(m)
	}
	return v1alpha1.ReasonInvalidSpec
}

// waitsForReference reports whether a Ready reason says the ToolSet waits
// for a Secret or ConfigMap (or a key of one) to appear.
func waitsForReference(reason string) bool {
	switch reason {
	case v1alpha1.ReasonSecretNotFound, v1alpha1.ReasonSecretKeyNotFound,
		v1alpha1.ReasonConfigMapNotFound, v1alpha1.ReasonConfigMapKeyNotFound:
		return true
	}
	return false
}
