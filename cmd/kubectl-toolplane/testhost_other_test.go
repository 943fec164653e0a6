//go:build !linux

package main

import (
	"errors"
	"net"
)

// testHost is a network namespace of the test's own; only Linux has them.
type testHost struct {
	IP     string
	HostIP string
}

func testHostUnavailable() string { return "network namespaces are Linux's" }

func newTestHost() (*testHost, error) { return nil, errors.New(testHostUnavailable()) }

func (*testHost) Listen(string) (net.Listener, error) {
	return nil, errors.New(testHostUnavailable())
}

func (*testHost) Close() {}
