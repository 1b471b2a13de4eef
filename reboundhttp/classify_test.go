package reboundhttp_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rebound-go/rebound/reboundhttp"
)

func TestNeverSentAndDefaultClassifier(t *testing.T) {
	for _, tc := range []struct {
		name             string
		err              error
		never, retryable bool
	}{
		{"dial", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true, true},
		{"proxy", &net.OpError{Op: "proxyconnect", Net: "tcp", Err: errors.New("x")}, true, true},
		{"refused, wrapped", fmt.Errorf("x: %w", syscall.ECONNREFUSED), true, true},
		{"dns", &net.DNSError{Err: "no such host", Name: "svc"}, true, true},
		{"tls record, first", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake", Conn: &net.TCPConn{}}, true, true},
		{"tls record, later", tls.RecordHeaderError{Msg: "received record with version 301 when expecting version 303"}, false, false},
		{"tls alert", tls.AlertError(40), true, true},
		{"tls timeout", errors.New("net/http: TLS handshake timeout"), true, true},
		{"goaway", errors.New("http2: Transport received Server's graceful shutdown GOAWAY"), true, true},
		{"goaway, no GetBody", errors.New("http2: Transport: cannot retry err [http2: Transport received Server's graceful shutdown GOAWAY] after Request.Body was written; define Request.GetBody to avoid this error"), true, true},
		{"reset after write", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false, true},
		{"eof", io.ErrUnexpectedEOF, false, true},
		{"canceled", context.Canceled, false, false},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false, false},
		{"other", errors.New("unsupported protocol scheme"), false, false},
	} {
		if got := reboundhttp.NeverSent(tc.err); got != tc.never {
			t.Errorf("%s: NeverSent = %v, want %v", tc.name, got, tc.never)
		}
		if got := reboundhttp.DefaultClassifier(nil, tc.err); got != tc.retryable {
			t.Errorf("%s: DefaultClassifier = %v, want %v", tc.name, got, tc.retryable)
		}
	}
	if reboundhttp.NeverSent(nil) {
		t.Error("NeverSent(nil)")
	}
}

// A certificate the client rejects: the server never saw the request, but
// retrying cannot help, so even a GET is tried once.
func TestBadCertificateNotRetried(t *testing.T) {
	var n atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the client's rejection
	ts.StartTLS()
	defer ts.Close()
	var dials int
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials++
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer base.CloseIdleConnections()
	rt := newTransport(t, base, fast, fastLimit)
	req, _ := http.NewRequest("GET", ts.URL, nil)
	_, err := rt.RoundTrip(req)
	if err == nil || !reboundhttp.NeverSent(err) || dials != 1 || n.Load() != 0 {
		t.Fatalf("err %v, %d dials, %d requests; want a certificate error after 1 dial", err, dials, n.Load())
	}
}
