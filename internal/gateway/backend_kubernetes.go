package gateway

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/credentials"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// KubernetesCredentials reads a ToolSet's spec.authorization and spec.tls
// as the operator's scraper does: the ToolSet by name, then the Secret (or
// the CA's ConfigMap) it names, by name, in the ToolSet's own namespace,
// one object at a time. It never lists or watches Secrets, so the gateway
// needs get on toolsets, and get on secrets and configmaps only in the
// namespaces whose ToolSets it must call with credentials (see
// docs/operations.md). Its errors name the object and key, never a value.
type KubernetesCredentials struct {
	// Reader reads ToolSets, Secrets and ConfigMaps. Give it an uncached
	// client (client.New), so that the gateway caches no Secret beyond the
	// one ToolSet's TTL and needs no list or watch.
	Reader client.Reader
}

// BackendCredentials reads the credentials of toolSet, as the scraper does
// ([credentials.Load]): spec.tls is read only when the ToolSet has one.
func (k *KubernetesCredentials) BackendCredentials(ctx context.Context, toolSet spec.ObjectReference) (*BackendCredentials, error) {
	ts := &v1alpha1.ToolSet{}
	if err := k.Reader.Get(ctx, types.NamespacedName{Namespace: toolSet.Namespace, Name: toolSet.Name}, ts); err != nil {
		return nil, fmt.Errorf("getting the ToolSet: %w", apiError(err))
	}
	c, err := credentials.Load(ctx, forbiddenAsAdvice{k.Reader}, ts, ts.Spec.TLS != nil)
	if err != nil {
		return nil, err
	}
	return &BackendCredentials{BearerToken: c.BearerToken, TLS: c.TLS, TLSKey: c.TLSKey}, nil
}

// forbiddenAsAdvice reads as its Reader does, with a refusal of the
// gateway's RBAC turned into what to grant.
type forbiddenAsAdvice struct{ client.Reader }

func (r forbiddenAsAdvice) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if apierrors.IsForbidden(err) {
		return errForbidden
	}
	return err
}

// errForbidden is an object the gateway may not read: its RBAC does not
// reach that namespace.
var errForbidden = errors.New("the gateway may not read it (grant it get in the ToolSet's namespace: see docs/operations.md, backend credentials)")

// apiError is err as the caller may see it: the API server's status
// message names the object, never its content.
func apiError(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return errors.New("not found")
	case apierrors.IsForbidden(err):
		return errForbidden
	}
	return err
}
