package gateway

import (
	"net"
	"testing"
)

// loopbackAddr says of a TCP address what isLoopback says of its string.
func TestLoopbackAddrIsIsLoopbackOfTheString(t *testing.T) {
	for _, a := range []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 80},
		&net.TCPAddr{IP: net.IPv4(127, 9, 8, 7), Port: 80},
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 443},
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 443, Zone: "lo"},
		&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"},
		&net.TCPAddr{IP: net.ParseIP("0.0.0.0"), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("::"), Port: 1},
		&net.TCPAddr{Port: 1},
		&net.TCPAddr{IP: net.IP{1, 2, 3}, Port: 1},
		&net.UnixAddr{Name: "/run/x.sock", Net: "unix"},
	} {
		if got, want := loopbackAddr(a), isLoopback(a.String()); got != want {
			t.Errorf("%s: %v, isLoopback of its string %v", a, got, want)
		}
	}
}
