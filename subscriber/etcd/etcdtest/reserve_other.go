//go:build !linux

package etcdtest

import "net"

// reservePort returns a loopback port that is free when it returns; it is
// not reserved afterwards (see freePorts), so release does nothing.
func reservePort() (int, func(), error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port, func() {}, nil
}
