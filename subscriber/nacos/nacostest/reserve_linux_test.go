package nacostest

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// A stopped server's port stays reserved: no other socket can bind it (an
// outgoing connection's local port is bound by the same rule, without
// SO_REUSEADDR), a connection to it is refused as to a stopped process,
// and Start listens on it again. Without the reservation the bind
// succeeds, and something else on a busy machine can take the port
// before Start ("bind: address already in use").
func TestStoppedServerPortStaysReserved(t *testing.T) {
	srv, err := NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.Stop()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = syscall.Bind(fd, &syscall.SockaddrInet4{Port: int(srv.GRPCPort()), Addr: [4]byte{127, 0, 0, 1}})
	_ = syscall.Close(fd)
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("binding the stopped server's port %d: %v, want EADDRINUSE", srv.GRPCPort(), err)
	}
	if conn, err := net.Dial("tcp4", srv.Addr()); err == nil {
		conn.Close()
		t.Error("a connection to the stopped server was accepted")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialing the stopped server: %v, want connection refused", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start on the reserved port: %v", err)
	}
	conn, err := net.Dial("tcp4", srv.Addr())
	if err != nil {
		t.Fatalf("dialing the restarted server: %v", err)
	}
	conn.Close()
}
