package credentials_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/toolplane/toolplane/api/v1alpha1"
	"github.com/toolplane/toolplane/internal/credentials"
)

// TestLoadKeysTLSSettings derives the client's TLS key from what it is
// built from, and from no secret.
func TestLoadKeysTLSSettings(t *testing.T) {
	ts := &v1alpha1.ToolSet{Spec: v1alpha1.ToolSetSpec{Scheme: "https", TLS: &v1alpha1.TLSConfig{ServerName: "a.example"}}}
	a, err := credentials.Load(context.Background(), nil, ts, true)
	if err != nil {
		t.Fatal(err)
	}
	ts.Spec.TLS.ServerName = "b.example"
	b, err := credentials.Load(context.Background(), nil, ts, true)
	if err != nil {
		t.Fatal(err)
	}
	if a.TLSKey == "" || a.TLSKey == b.TLSKey {
		t.Errorf("TLS keys %q and %q: want distinct and set", a.TLSKey, b.TLSKey)
	}
	plain, err := credentials.Load(context.Background(), nil, ts, false)
	if err != nil {
		t.Fatal(err)
	}
	if plain.TLS != nil || plain.TLSKey != "" {
		t.Errorf("without TLS: config %v, key %q", plain.TLS, plain.TLSKey)
	}
}

// TestLoadRefusesWhatAHeaderOrAPoolCannotTake reads hostile Secret and
// ConfigMap values: each is refused as invalid, naming the object and key
// and never the value.
func TestLoadRefusesWhatAHeaderOrAPoolCannotTake(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secret := func(name, value string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Data: map[string][]byte{"v": []byte(value)}}
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		secret("empty", "  \n"),
		secret("huge", strings.Repeat("s3cr3t", credentials.MaxTokenBytes)),
		secret("split", "s3cr3t\r\nX-Injected: yes"),
		secret("ok", " s3cr3t\n"),
		secret("notpem", "s3cr3t"),
		secret("bigca", strings.Repeat("s3cr3t", credentials.MaxCABytes)),
	).Build()
	token := func(name string) *v1alpha1.ToolSet {
		return &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team"}, Spec: v1alpha1.ToolSetSpec{
			Authorization: &v1alpha1.Authorization{BearerToken: v1alpha1.KeyReference{Name: name, Key: "v"}}}}
	}
	ca := func(name string) *v1alpha1.ToolSet {
		return &v1alpha1.ToolSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team"}, Spec: v1alpha1.ToolSetSpec{
			Scheme: "https", TLS: &v1alpha1.TLSConfig{CA: &v1alpha1.CASource{Secret: &v1alpha1.KeyReference{Name: name, Key: "v"}}}}}
	}
	for name, ts := range map[string]*v1alpha1.ToolSet{
		"empty": token("empty"), "huge": token("huge"), "split": token("split"),
		"notpem": ca("notpem"), "bigca": ca("bigca"),
		"missing": token("missing"), "other namespace's": {ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere"}, Spec: token("ok").Spec},
	} {
		_, err := credentials.Load(context.Background(), reader, ts, true)
		if !errors.Is(err, credentials.ErrInvalid) {
			t.Errorf("%s: error %v, want ErrInvalid", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error echoes the value: %v", name, err)
		}
	}
	got, err := credentials.Load(context.Background(), reader, token("ok"), false)
	if err != nil || got.BearerToken != "s3cr3t" {
		t.Fatalf("ok: %+v, %v; want the token trimmed", got, err)
	}
	_, err = credentials.Load(context.Background(), reader, token("missing"), false)
	if m, ok := errors.AsType[*credentials.MissingReference](err); !ok || m.Kind != credentials.KindSecret || m.Name != "missing" || m.KeyOnly {
		t.Fatalf("missing: %v, want a MissingReference to Secret missing", err)
	}
}
