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
// retries errors marked rebound.Transient, cluster.ErrNoInvokers, an
// attempt's own deadline and network errors (net.Error, ECONNREFUSED,
// ECONNRESET, ...). It never retries a nil, Permanent, context.Canceled or
// business error, nor a TLS or certificate failure, even marked Transient.
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
