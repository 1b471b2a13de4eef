package failback

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// DefaultRetryable is the classifier New uses without WithRetryable. It
// reports true for errors that a later attempt, possibly on another
// provider, may not hit:
//
//   - errors marked by the invoker with rebound.Transient;
//   - cluster.ErrNoInvokers: the directory is empty now, but providers come
//     back (a closed directory, cluster.ErrClosed, is not retryable);
//   - context.DeadlineExceeded: the Invoker applies this only to an
//     attempt's own deadline (WithAttemptTimeout, or a timeout inside the
//     invoker); when the caller's context is done the call is never queued,
//     whatever the classifier says;
//   - network errors: syscall.ECONNREFUSED, ECONNRESET and ECONNABORTED,
//     io.ErrUnexpectedEOF, net.ErrClosed, and any net.Error (*net.OpError,
//     *net.DNSError, *url.Error, timeouts, ...).
//
// Everything else, including context.Canceled and plain business errors,
// is not retryable. A nil error and an error marked rebound.Permanent are
// never retryable, and neither are TLS and certificate failures, wherever
// they are in the chain (inside a *url.Error or *net.OpError, and even
// under a Transient mark, since invokers often mark every transport error):
// x509 verification errors (unknown authority, bad host name, invalid or
// expired certificate, no system roots, ...), *tls.CertificateVerificationError,
// tls.RecordHeaderError (the server does not speak TLS) and tls.AlertError
// (the peer refused the handshake). They do not heal by retrying.
//
// Compose it in a custom classifier:
//
//	failback.WithRetryable(func(err error) bool {
//		return errors.Is(err, errOverloaded) || failback.DefaultRetryable(err)
//	})
func DefaultRetryable(err error) bool {
	switch {
	case err == nil, rebound.IsPermanent(err), isTLSFailure(err):
		return false
	case rebound.IsTransient(err),
		errors.Is(err, cluster.ErrNoInvokers),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed):
		return true
	case errors.Is(err, context.Canceled):
		return false
	}
	_, ok := errors.AsType[net.Error](err)
	return ok
}

// retryable applies the configured classifier; Permanent always wins.
func (f *Invoker) retryable(err error) bool {
	if rebound.IsPermanent(err) {
		return false
	}
	return f.cfg.retryable(err)
}

// isTLSFailure reports whether err is, or wraps, a TLS handshake or
// certificate verification failure. It walks the error tree once.
func isTLSFailure(err error) bool {
	for err != nil {
		switch e := err.(type) {
		case *tls.CertificateVerificationError, tls.RecordHeaderError, *tls.RecordHeaderError, tls.AlertError,
			x509.UnknownAuthorityError, *x509.UnknownAuthorityError, x509.HostnameError, *x509.HostnameError,
			x509.CertificateInvalidError, *x509.CertificateInvalidError, x509.SystemRootsError, *x509.SystemRootsError,
			x509.ConstraintViolationError, *x509.ConstraintViolationError,
			x509.UnhandledCriticalExtension, *x509.UnhandledCriticalExtension,
			x509.InsecureAlgorithmError, *x509.InsecureAlgorithmError:
			return true
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if isTLSFailure(inner) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		default:
			return false
		}
	}
	return false
}
