package harness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolplane/toolplane/toolkit/spec"
)

// LoopbackIP returns the address 127.0.<i/256>.<i%256+2>: Linux routes the
// whole of 127.0.0.0/8 to the loopback interface, so a test can stand in
// for many client machines, each with an address of its own, and keep
// 127.0.0.1 for the well-behaved client. i must be below 65,024.
func LoopbackIP(i int) net.IP {
	i += 2
	return net.IPv4(127, 0, byte(i>>8), byte(i))
}

// DialerFrom returns a dialer whose connections leave from ip.
func DialerFrom(ip net.IP) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}
}

// ClientFrom returns an HTTP client whose connections leave from ip, with
// up to conns connections kept per host and no overall timeout (give each
// request a context).
func ClientFrom(ip net.IP, conns int) *http.Client {
	tr := &http.Transport{
		DialContext:         DialerFrom(ip).DialContext,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		ForceAttemptHTTP2:   false,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr}
}

// WriteTable publishes t as the table base in namespace, as the manager
// would (one ConfigMap for a small table, an index and chunks for a large
// one), creating or replacing its ConfigMaps; for tests of readers of the
// table that need no manager.
func WriteTable(ctx context.Context, c client.Client, namespace, base string, t *spec.Table) error {
	if t.Revision == "" {
		t.Revision = spec.TableRevision(t.Tools)
	}
	if t.SchemaVersion == "" {
		t.SchemaVersion = spec.SchemaVersion
	}
	parts, err := spec.EncodeTable(t, base)
	if err != nil {
		return err
	}
	for _, p := range parts {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: p.Name}, Data: p.Data, BinaryData: p.BinaryData}
		err := c.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			old := &corev1.ConfigMap{}
			if err = c.Get(ctx, client.ObjectKeyFromObject(cm), old); err == nil {
				old.Data, old.BinaryData = p.Data, p.BinaryData
				err = c.Update(ctx, old)
			}
		}
		if err != nil {
			return fmt.Errorf("writing ConfigMap %s/%s: %w", namespace, p.Name, err)
		}
	}
	return nil
}
