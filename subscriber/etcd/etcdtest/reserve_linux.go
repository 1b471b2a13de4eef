package etcdtest

import (
	"fmt"
	"syscall"
)

// reservePort binds a socket to a free loopback port without listening on
// it, with SO_REUSEADDR, and returns the port and a func that closes the
// socket. While it is open, Linux gives the port to no other socket: not
// as the local port of an outgoing connection, not to a listener on port
// 0, not to an explicit bind without SO_REUSEADDR; a connection to it is
// refused. A listener of this process on the port (Go's net.Listen sets
// SO_REUSEADDR) binds next to it, so a member and its proxy can stop and
// start on their ports for the life of the Cluster.
func reservePort() (int, func(), error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("socket: %w", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		_ = syscall.Close(fd)
		return 0, nil, fmt.Errorf("SO_REUSEADDR: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		_ = syscall.Close(fd)
		return 0, nil, fmt.Errorf("bind: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return 0, nil, fmt.Errorf("getsockname: %w", err)
	}
	sa4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		_ = syscall.Close(fd)
		return 0, nil, fmt.Errorf("getsockname: %T", sa)
	}
	return sa4.Port, func() { _ = syscall.Close(fd) }, nil
}
