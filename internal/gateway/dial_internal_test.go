package gateway

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// reply builds a DNS reply to an A query for host with the given answers.
func reply(t *testing.T, host string, answers func(b *dnsmessage.Builder)) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, Response: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(host + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	_ = b.StartAnswers()
	answers(&b)
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// Over TCP (a truncated UDP reply, or resolv.conf's use-vc) the resolver
// reads length-prefixed messages in pieces of any size; the watch sees each
// whole message however the reads cut them.
func TestAliasWatchReadsAStreamInPieces(t *testing.T) {
	const host = "tools.crm.svc.cluster.local"
	hdr := func(name string) dnsmessage.ResourceHeader {
		return dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name + "."), Class: dnsmessage.ClassINET, TTL: 5}
	}
	plain := reply(t, host, func(b *dnsmessage.Builder) {
		_ = b.AResource(hdr(host), dnsmessage.AResource{A: [4]byte{10, 0, 0, 1}})
	})
	alias := reply(t, host, func(b *dnsmessage.Builder) {
		_ = b.CNAMEResource(hdr(host), dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("vault-api.vault.svc.cluster.local.")})
		_ = b.AResource(hdr("vault-api.vault.svc.cluster.local"), dnsmessage.AResource{A: [4]byte{10, 0, 0, 2}})
	})
	var stream []byte
	for _, m := range [][]byte{plain, alias} {
		stream = binary.BigEndian.AppendUint16(stream, uint16(len(m)))
		stream = append(stream, m...)
	}

	for _, piece := range []int{1, 2, 3, 7, len(stream)} {
		server, client := net.Pipe()
		go func() {
			for i := 0; i < len(stream); i += piece {
				_, _ = server.Write(stream[i:min(i+piece, len(stream))])
			}
			_ = server.Close()
		}()
		w := &aliasWatch{host: host}
		c := &watchedStreamConn{Conn: client, w: w}
		buf := make([]byte, piece)
		for {
			if _, err := c.Read(buf); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if got := w.alias(); got != "vault-api.vault.svc.cluster.local" {
			t.Errorf("read %d bytes at a time: the watch found %q, want the CNAME's target", piece, got)
		}
	}

	// The plain reply alone shows no alias.
	w := &aliasWatch{host: host}
	w.inspect(plain)
	if got := w.alias(); got != "" {
		t.Errorf("a plain reply: the watch found %q", got)
	}
}
