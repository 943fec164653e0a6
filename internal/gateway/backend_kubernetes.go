package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/toolkit/spec"
)

// maxBackendTokenBytes bounds a bearer token read from a Secret: far above any
// real token, far below what a header may hold.
const maxBackendTokenBytes = 16 << 10

// maxCABytes bounds a CA bundle read for a ToolSet: a private CA is a
// certificate or a few, and the gateway keeps a pool per ToolSet.
const maxCABytes = 64 << 10

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

// BackendCredentials reads the credentials of toolSet.
func (k *KubernetesCredentials) BackendCredentials(ctx context.Context, toolSet spec.ObjectReference) (*BackendCredentials, error) {
	ts := &v1alpha1.ToolSet{}
	if err := k.Reader.Get(ctx, types.NamespacedName{Namespace: toolSet.Namespace, Name: toolSet.Name}, ts); err != nil {
		return nil, fmt.Errorf("getting the ToolSet: %w", apiError(err))
	}
	creds := &BackendCredentials{}
	if a := ts.Spec.Authorization; a != nil {
		raw, err := k.readKey(ctx, &corev1.Secret{}, ts.Namespace, a.BearerToken)
		if err != nil {
			return nil, fmt.Errorf("reading spec.authorization.bearerToken: %w", err)
		}
		token := strings.TrimSpace(string(raw))
		switch {
		case token == "":
			return nil, fmt.Errorf("reading spec.authorization.bearerToken: key %q of Secret %s is empty", a.BearerToken.Key, a.BearerToken.Name)
		case len(token) > maxBackendTokenBytes:
			return nil, fmt.Errorf("reading spec.authorization.bearerToken: key %q of Secret %s holds more than %d bytes", a.BearerToken.Key, a.BearerToken.Name, maxBackendTokenBytes)
		case strings.ContainsAny(token, "\r\n\x00"):
			return nil, fmt.Errorf("reading spec.authorization.bearerToken: key %q of Secret %s is not a valid header value", a.BearerToken.Key, a.BearerToken.Name)
		}
		creds.BearerToken = token
	}
	if t := ts.Spec.TLS; t != nil {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // the ToolSet asks for it, for testing
		key := sha256.New()
		fmt.Fprintf(key, "%q;%t;", t.ServerName, t.InsecureSkipVerify)
		if ca := t.CA; ca != nil {
			var (
				raw []byte
				ref v1alpha1.KeyReference
				err error
			)
			if ca.Secret != nil {
				ref = *ca.Secret
				raw, err = k.readKey(ctx, &corev1.Secret{}, ts.Namespace, ref)
			} else if ca.ConfigMap != nil {
				ref = *ca.ConfigMap
				raw, err = k.readKey(ctx, &corev1.ConfigMap{}, ts.Namespace, ref)
			}
			if err != nil {
				return nil, fmt.Errorf("reading spec.tls.ca: %w", err)
			}
			if len(raw) > maxCABytes {
				return nil, fmt.Errorf("reading spec.tls.ca: key %q of %s holds more than %d bytes", ref.Key, ref.Name, maxCABytes)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(raw) {
				return nil, fmt.Errorf("reading spec.tls.ca: key %q of %s holds no PEM certificate", ref.Key, ref.Name)
			}
			cfg.RootCAs = pool
			key.Write(raw)
		}
		creds.TLS, creds.TLSKey = cfg, hex.EncodeToString(key.Sum(nil))
	}
	return creds, nil
}

// readKey reads one key of a Secret or ConfigMap in namespace.
func (k *KubernetesCredentials) readKey(ctx context.Context, obj client.Object, namespace string, ref v1alpha1.KeyReference) ([]byte, error) {
	kind := "ConfigMap"
	if _, ok := obj.(*corev1.Secret); ok {
		kind = "Secret"
	}
	if err := k.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		return nil, fmt.Errorf("getting %s %s: %w", kind, ref.Name, apiError(err))
	}
	switch o := obj.(type) {
	case *corev1.Secret:
		if v, ok := o.Data[ref.Key]; ok {
			return v, nil
		}
	case *corev1.ConfigMap:
		if v, ok := o.Data[ref.Key]; ok {
			return []byte(v), nil
		}
		if v, ok := o.BinaryData[ref.Key]; ok {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%s %s has no key %q", kind, ref.Name, ref.Key)
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
