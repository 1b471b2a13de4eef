package etcdtest

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
)

// A stopped member's ports stay reserved: no other socket can bind them
// (an outgoing connection's local port is bound by the same rule, without
// SO_REUSEADDR), a connection to them is refused as to a stopped process,
// and the member starts again on them. Without the reservation the bind
// succeeds, and on a busy machine something else took a stopped member's
// port ("bind: address already in use" at StartMember).
func TestStoppedMemberPortsStayReserved(t *testing.T) {
	c, err := NewCluster(1, WithDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.StopMember(0)
	m := c.members[0]
	for _, u := range []struct{ name, host string }{{"peer", m.peer.Host}, {"client", m.internal.Host}, {"public", m.public.Host}} {
		_, p, err := net.SplitHostPort(u.host)
		if err != nil {
			t.Fatal(err)
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			t.Fatal(err)
		}
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
		_ = syscall.Close(fd)
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("binding the stopped member's %s port %d: %v, want EADDRINUSE", u.name, port, err)
		}
	}
	if conn, err := net.Dial("tcp4", m.public.Host); err == nil {
		conn.Close()
		t.Error("a connection to the stopped member's endpoint was accepted")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialing the stopped member: %v, want connection refused", err)
	}
	if err := c.StartMember(0); err != nil {
		t.Fatalf("StartMember on the reserved ports: %v", err)
	}
}
