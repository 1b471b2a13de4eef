package nacostest

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// reserveAddr binds a socket to addr (an IPv4 "ip:port"; port 0 picks a
// free one) with SO_REUSEADDR, without listening on it, and returns the
// bound address and a func that closes the socket. While it is open, Linux
// gives the port to no other socket: not as the local port of an outgoing
// connection, not to a listener on port 0, not to a bind without
// SO_REUSEADDR; a connection to it is refused, as to a stopped process.
// The server's own listener (Go's net.Listen sets SO_REUSEADDR) binds next
// to it, so Stop and Start find the port free for the life of the Server:
// without it, a busy machine's outgoing connections (whose local ports
// come from the same ephemeral range) or a client reconnecting to the
// stopped port (a TCP self-connect) can take it, and Start fails with
// "bind: address already in use".
func reserveAddr(addr string) (string, func(), error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, err
	}
	ip := net.ParseIP(host).To4()
	p, err := strconv.Atoi(port)
	if ip == nil || err != nil {
		return "", nil, fmt.Errorf("not an IPv4 address: %q", addr)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("socket: %w", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("SO_REUSEADDR: %w", err)
	}
	sa := &syscall.SockaddrInet4{Port: p}
	copy(sa.Addr[:], ip)
	if err := syscall.Bind(fd, sa); err != nil {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("bind %s: %w", addr, err)
	}
	got, err := syscall.Getsockname(fd)
	if err != nil {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: %w", err)
	}
	g4, ok := got.(*syscall.SockaddrInet4)
	if !ok {
		_ = syscall.Close(fd)
		return "", nil, fmt.Errorf("getsockname: %T", got)
	}
	return net.JoinHostPort(host, strconv.Itoa(g4.Port)), func() { _ = syscall.Close(fd) }, nil
}
