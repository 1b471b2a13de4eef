// Package pgtest runs a throwaway PostgreSQL server for tests and
// examples: Debian's postgresql package (initdb and postgres under
// /usr/lib/postgresql/*/bin), a data directory in a temporary directory,
// a free 127.0.0.1 port, trust authentication, fsync off (ALTER SYSTEM
// SET fsync = on and pg_reload_conf() turn it on). Run as root, the
// server runs as the unprivileged user "postgres" (initdb refuses root).
// It is test support: exported so that the examples start their server
// the same way, not meant for production.
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//	func TestX(t *testing.T) { srv := pgtest.Shared(t); ... srv.DSN() ... }
//
// Without the binaries, Shared skips the test with a message saying how
// to install them; with CI=true it fails it instead. PGTEST_DSN, if set,
// names a server to use instead of starting one (the re-executed child
// processes of a test get it so).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// EnvDSN is the environment variable that names a running server to use.
const EnvDSN = "PGTEST_DSN"

// Server is a running PostgreSQL server. Its methods are not safe for
// concurrent use.
type Server struct {
	dir, bin, port string
	cred           *syscall.Credential
	cmd            *exec.Cmd
	exited         chan struct{}
	dsn            string
}

var (
	shared    *Server
	sharedErr error
)

// Main starts the shared server, runs the tests and stops the server; it
// returns m.Run's code. A missing server is Shared's to report.
func Main(m *testing.M) int {
	if os.Getenv(EnvDSN) == "" {
		shared, sharedErr = Start()
		if shared != nil {
			defer shared.Stop()
		}
	}
	return m.Run()
}

// Shared returns the server Main started (or the one PGTEST_DSN names),
// or skips t (fails it with CI=true) when there is none.
func Shared(t testing.TB) *Server {
	t.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return &Server{dsn: dsn}
	}
	if shared != nil {
		return shared
	}
	err := sharedErr
	if err == nil {
		err = errors.New("pgtest.Main did not run (call it from TestMain)")
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("pgtest: no PostgreSQL server: %v", err)
	}
	t.Skipf("pgtest: no PostgreSQL server (install it: apt-get install postgresql): %v", err)
	return nil
}

// DSN returns the server's connection string (database postgres, user
// postgres).
func (s *Server) DSN() string { return s.dsn }

// Start creates a data directory and starts a server in it.
func Start() (*Server, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		return nil, errors.New("no /usr/lib/postgresql/*/bin/initdb (Debian's postgresql package)")
	}
	s := &Server{bin: filepath.Dir(bins[len(bins)-1])}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s.dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			s.removeDir()
			return nil, fmt.Errorf("running as root needs the user postgres: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			s.removeDir()
			return nil, err
		}
	}
	out, err := s.command("initdb", "-D", s.data(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync").CombinedOutput()
	if err != nil {
		s.removeDir()
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	// fsync off (a throwaway server), in the configuration file so that
	// ALTER SYSTEM can turn it on for a benchmark.
	conf, err := os.OpenFile(filepath.Join(s.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = conf.WriteString("\nfsync = off\nmax_connections = 200\nshared_buffers = 32MB\nlisten_addresses = '127.0.0.1'\n")
		err = errors.Join(err, conf.Close())
	}
	if err != nil {
		s.removeDir()
		return nil, err
	}
	if err := s.start(); err != nil {
		s.removeDir()
		return nil, err
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	// The server dies with the test process, even if it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	return cmd
}

// start runs postgres on a free port and waits until it accepts
// connections.
func (s *Server) start() error {
	if s.port == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		_, s.port, _ = net.SplitHostPort(l.Addr().String())
		_ = l.Close()
	}
	s.dsn = "postgres://postgres@127.0.0.1:" + s.port + "/postgres?sslmode=disable"
	log, err := os.OpenFile(filepath.Join(s.dir, "log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	s.cmd = s.command("postgres", "-D", s.data(), "-p", s.port, "-k", s.dir)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.cmd, s.exited)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := pgconn.Connect(ctx, s.dsn)
		if err == nil {
			_ = c.Close(ctx)
			return nil
		}
		select {
		case <-s.exited:
			b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("postgres exited: %s", b)
		case <-ctx.Done():
			s.kill()
			return fmt.Errorf("postgres did not accept connections within 60 s: %w", err)
		case <-tick.C:
		}
	}
}

// kill stops the server at once (SIGQUIT: immediate shutdown) and waits
// for it.
func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	s.cmd = nil
}

// Restart stops the server at once, as a crash would (every connection
// is cut), and starts it again on the same port with the same data.
func (s *Server) Restart() error {
	if s.dir == "" {
		return errors.New("pgtest: Restart: the server was not started by this process")
	}
	s.kill()
	return s.start()
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() {
	if s.dir == "" {
		return
	}
	s.kill()
	s.removeDir()
}

func (s *Server) removeDir() { _ = os.RemoveAll(s.dir); s.dir = "" }
