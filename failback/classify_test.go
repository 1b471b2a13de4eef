package failback

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

func TestDefaultRetryable(t *testing.T) {
	business := errors.New("insufficient balance")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"net.OpError refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"net.OpError read timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"ECONNREFUSED wrapped", fmt.Errorf("call: %w", syscall.ECONNREFUSED), true},
		{"ECONNRESET wrapped", fmt.Errorf("call: %w", syscall.ECONNRESET), true},
		{"url.Error over reset", &url.Error{Op: "Post", URL: "http://x", Err: syscall.ECONNRESET}, true},
		{"DNS timeout", &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, true},
		{"io.ErrUnexpectedEOF", fmt.Errorf("decode: %w", io.ErrUnexpectedEOF), true},
		{"net.ErrClosed", fmt.Errorf("write: %w", net.ErrClosed), true},
		{"attempt's DeadlineExceeded", fmt.Errorf("call: %w", context.DeadlineExceeded), true},
		{"context.Canceled", context.Canceled, false},
		{"rebound.Transient", rebound.Transient(errors.New("leader not elected")), true},
		{"wrapped Transient", fmt.Errorf("x: %w", rebound.Transient(business)), true},
		{"empty directory", fmt.Errorf("list: %w", cluster.ErrNoInvokers), true},
		{"closed directory", fmt.Errorf("cluster: directory closed: %w", rebound.ErrClosed), false},
		{"business error", business, false},
		{"io.EOF", io.EOF, false},
		{"Retry-After on business", rebound.RetryAfter(time.Second, business), false},
		{"Retry-After on transient", rebound.RetryAfter(time.Second, rebound.Transient(business)), true},
		{"Permanent network error", rebound.Permanent(fmt.Errorf("x: %w", syscall.ECONNREFUSED)), false},
		{"Permanent over Transient", rebound.Permanent(rebound.Transient(business)), false},
		{"Transient over Permanent", rebound.Transient(rebound.Permanent(business)), false},
		// TLS and certificate failures never heal by retrying (issue 14).
		{"url.Error over unknown authority", &url.Error{Op: "Post", URL: "https://x", Err: x509.UnknownAuthorityError{}}, false},
		{"url.Error over verification", &url.Error{Op: "Post", URL: "https://x", Err: &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Reason: x509.Expired}}}, false},
		{"url.Error over host name", &url.Error{Op: "Get", URL: "https://x", Err: x509.HostnameError{Host: "x"}}, false},
		{"url.Error over plain HTTP", &url.Error{Op: "Get", URL: "https://x", Err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}}, false},
		{"net.OpError over TLS alert", &net.OpError{Op: "remote error", Net: "tcp", Err: tls.AlertError(42)}, false},
		{"Transient over TLS failure", rebound.Transient(&url.Error{Op: "Post", URL: "https://x", Err: x509.UnknownAuthorityError{}}), false},
		{"rebound.Transient", rebound.Transient(business), true},
	} {
		if got := DefaultRetryable(tc.err); got != tc.want {
			t.Errorf("%s: DefaultRetryable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
