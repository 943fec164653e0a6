// Package credentials reads what a ToolSet names for calling its workload:
// the bearer token of spec.authorization and the trust of spec.tls. The
// operator's scraper and the gateway read them the same way, with the same
// least privilege: the one Secret (or CA ConfigMap) a ToolSet names, by
// name, in the ToolSet's own namespace, never listed or watched, and bounded
// in size. Errors name the object and the key, never a value.
package credentials

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
)

// Bounds of what a Secret or ConfigMap may hold for a ToolSet. The API
// server already caps an object at about 1 MiB; these keep what is held per
// ToolSet small.
const (
	// MaxTokenBytes bounds a bearer token: far above any real token, far
	// below what a header may hold.
	MaxTokenBytes = 16 << 10
	// MaxCABytes bounds a CA bundle: a private CA is a certificate or a
	// few, and a pool is kept per ToolSet.
	MaxCABytes = 64 << 10
)

// ErrInvalid marks a credential the ToolSet's owner must fix: a missing
// Secret, ConfigMap or key (a [*MissingReference]), an empty or oversized
// token, a CA bundle with no certificate.
var ErrInvalid = errors.New("invalid credentials")

// Credentials are what a ToolSet's workload is called with.
type Credentials struct {
	// BearerToken is spec.authorization's token, trimmed; empty without
	// spec.authorization. Send it only over https, and only to the
	// ToolSet's own workload.
	BearerToken string
	// TLS is the client configuration for spec.tls (TLS 1.2 or later, the
	// server name, the CA bundle as the only roots); nil unless asked for.
	TLS *tls.Config
	// TLSKey identifies TLS, the CA bundle by its digest, so that a client
	// built for it can be cached and rebuilt when it changes.
	TLSKey string
}

// Load reads the credentials of ts through reader. Give it an uncached
// reader, so that no Secret's data is cached beyond the caller's own use.
// withTLS builds [Credentials.TLS] (from spec.tls, or the defaults when
// the ToolSet has none); without it spec.tls is not read.
func Load(ctx context.Context, reader client.Reader, ts *v1alpha1.ToolSet, withTLS bool) (*Credentials, error) {
	creds := &Credentials{}
	if a := ts.Spec.Authorization; a != nil {
		raw, err := ReadKey(ctx, reader, &corev1.Secret{}, ts.Namespace, a.BearerToken)
		if err != nil {
			return nil, fmt.Errorf("reading spec.authorization.bearerToken: %w", err)
		}
		token := strings.TrimSpace(string(raw))
		switch {
		case token == "":
			return nil, fmt.Errorf("reading spec.authorization.bearerToken: %w: key %q of Secret %s is empty", ErrInvalid, a.BearerToken.Key, a.BearerToken.Name)
		case len(token) > MaxTokenBytes:
			return nil, fmt.Errorf("reading spec.authorization.bearerToken: %w: key %q of Secret %s holds more than %d bytes", ErrInvalid, a.BearerToken.Key, a.BearerToken.Name, MaxTokenBytes)
		case strings.ContainsAny(token, "\r\n\x00"):
			return nil, fmt.Errorf("reading spec.authorization.bearerToken: %w: key %q of Secret %s is not a valid header value", ErrInvalid, a.BearerToken.Key, a.BearerToken.Name)
		}
		creds.BearerToken = token
	}
	if !withTLS {
		return creds, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	key := sha256.New()
	if t := ts.Spec.TLS; t != nil {
		cfg.ServerName = t.ServerName
		cfg.InsecureSkipVerify = t.InsecureSkipVerify //nolint:gosec // the ToolSet asks for it, for testing
		fmt.Fprintf(key, "%q;%t;", t.ServerName, t.InsecureSkipVerify)
		if ca := t.CA; ca != nil {
			pool, pem, err := loadCA(ctx, reader, ts.Namespace, ca)
			if err != nil {
				return nil, fmt.Errorf("reading spec.tls.ca: %w", err)
			}
			cfg.RootCAs = pool
			key.Write(pem)
		}
	}
	creds.TLS, creds.TLSKey = cfg, "https:"+hex.EncodeToString(key.Sum(nil))
	return creds, nil
}

// loadCA returns the CA bundle as a pool, and as read.
func loadCA(ctx context.Context, reader client.Reader, ns string, ca *v1alpha1.CASource) (*x509.CertPool, []byte, error) {
	var (
		raw []byte
		err error
		ref v1alpha1.KeyReference
	)
	switch {
	case ca.Secret != nil:
		ref = *ca.Secret
		raw, err = ReadKey(ctx, reader, &corev1.Secret{}, ns, ref)
	case ca.ConfigMap != nil:
		ref = *ca.ConfigMap
		raw, err = ReadKey(ctx, reader, &corev1.ConfigMap{}, ns, ref)
	}
	if err != nil {
		return nil, nil, err
	}
	if len(raw) > MaxCABytes {
		return nil, nil, fmt.Errorf("%w: key %q of %s holds more than %d bytes", ErrInvalid, ref.Key, ref.Name, MaxCABytes)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, nil, fmt.Errorf("%w: key %q of %s holds no PEM certificate", ErrInvalid, ref.Key, ref.Name)
	}
	return pool, raw, nil
}

// ReadKey reads one key of a Secret or ConfigMap (obj says which) in ns. A
// missing object or key is a [*MissingReference]; any other error of the
// API server is returned wrapped, naming the object.
func ReadKey(ctx context.Context, reader client.Reader, obj client.Object, ns string, ref v1alpha1.KeyReference) ([]byte, error) {
	kind := KindConfigMap
	if _, ok := obj.(*corev1.Secret); ok {
		kind = KindSecret
	}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &MissingReference{Kind: kind, Name: ref.Name, Key: ref.Key}
		}
		return nil, fmt.Errorf("getting %s %s: %w", kind, ref.Name, err)
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
	return nil, &MissingReference{Kind: kind, Name: ref.Name, Key: ref.Key, KeyOnly: true}
}

// Kinds of a [MissingReference].
const (
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"
)

// MissingReference is a Secret or ConfigMap that a ToolSet names and that
// does not exist, or lacks the key. Its text names the object and the key,
// never a value.
type MissingReference struct {
	Kind, Name, Key string
	// KeyOnly is set when the object exists and only the key is missing.
	KeyOnly bool
}

func (e *MissingReference) Error() string {
	if e.KeyOnly {
		return e.Kind + " " + e.Name + " has no key \"" + e.Key + "\""
	}
	return e.Kind + " " + e.Name + " not found"
}

// Is makes a missing reference a credential the owner must fix.
func (e *MissingReference) Is(target error) bool { return target == ErrInvalid }
