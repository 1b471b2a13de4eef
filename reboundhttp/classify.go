package reboundhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// statusError is what the engine and its observers see as the error of an
// attempt whose response was a failure. RoundTrip returns the response
// itself, not this error.
type statusError struct {
	StatusCode int
}

func (e *statusError) Error() string {
	return "reboundhttp: status " + strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
}

var errNoGetBody = errors.New("reboundhttp: the request's body has no GetBody: it is sent once")

// defaultClassifier is the classifier New uses. It retries a 429, 502, 503
// or 504, an error neverSent recognises, and a network error (a reset, a
// connection timeout, an unexpected EOF). It does not retry a context's
// error nor a rejected certificate.
func defaultClassifier(resp *http.Response, err error) bool {
	if err == nil {
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || badCertificate(err) {
		return false
	}
	if neverSent(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	_, ok := errors.AsType[net.Error](err)
	return ok
}

func badCertificate(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	_, ok := errors.AsType[x509.CertificateInvalidError](err)
	return ok
}

// http2StreamError has the fields of net/http's bundled http2 StreamError
// (and x/net/http2's), whose As method fills any struct of that shape.
type http2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e http2StreamError) Error() string { return "http2 stream error" }

const http2RefusedStream = 0x7

// Texts of net/http's unexported HTTP/2 errors for a request the server
// did not process: a stream above a GOAWAY's last stream ID, and a
// connection that could take no new stream.
var http2Unprocessed = []string{
	"http2: Transport received Server's graceful shutdown GOAWAY",
	"http2: client conn not usable",
}

// neverSent reports whether err, from a RoundTripper, proves the server
// never saw the request: a failed dial or TLS handshake, an unreachable
// proxy, an HTTP/2 REFUSED_STREAM or a stream above a GOAWAY's last ID.
// Sending such a request again cannot apply it twice.
func neverSent(err error) bool {
	if err == nil {
		return false
	}
	if op, ok := errors.AsType[*net.OpError](err); ok && (op.Op == "dial" || op.Op == "proxyconnect") {
		return true
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	if rh, ok := errors.AsType[tls.RecordHeaderError](err); ok && rh.Conn != nil { // only the first record's: no TLS server
		return true
	}
	if _, ok := errors.AsType[tls.AlertError](err); ok {
		return true
	}
	var se http2StreamError
	if errors.As(err, &se) && se.Code == http2RefusedStream {
		return true
	}
	msg := err.Error() // the whole text or net/http's prefix: a GOAWAY's debug data is the server's
	for _, s := range http2Unprocessed {
		if msg == s || strings.HasPrefix(msg, "http2: Transport: cannot retry err ["+s+"]") {
			return true
		}
	}
	return msg == "net/http: TLS handshake timeout" || badCertificate(err)
}

// safeToRepeat reports whether req may be sent more than once whatever
// happened to an attempt: an idempotent method or an idempotency key.
func safeToRepeat(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return hasKey(req.Header)
}

// hasKey reports whether h carries a non-empty idempotency key: an empty
// one is no key, a server cannot deduplicate by it.
func hasKey(h http.Header) bool {
	return slices.ContainsFunc(h[idempotencyKeyHeader], notBlank) || slices.ContainsFunc(h["X-Idempotency-Key"], notBlank)
}

func notBlank(v string) bool { return strings.TrimSpace(v) != "" }

// withKey returns a shallow copy of req with key as its Idempotency-Key:
// a RoundTripper must not change the caller's request.
func withKey(req *http.Request, key string) *http.Request {
	r2 := *req
	r2.Header = req.Header.Clone()
	if r2.Header == nil {
		r2.Header = http.Header{}
	}
	r2.Header.Set(idempotencyKeyHeader, key)
	return &r2
}

// maxRetryAfterSeconds keeps a parsed Retry-After from overflowing a
// time.Duration; the engine caps it far lower (Policy.MaxRetryAfter).
const maxRetryAfterSeconds = 1 << 31

// retryAfter parses resp's Retry-After: delay-seconds or an HTTP-date
// (RFC 9110 §10.2.3). A date in the past is 0; a value that parses as
// neither is ignored.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 64); err == nil {
		return time.Duration(min(s, maxRetryAfterSeconds)) * time.Second, true
	}
	if len(v) > 0 && v[0] >= '0' && v[0] <= '9' && strings.Trim(v, "0123456789") == "" {
		return maxRetryAfterSeconds * time.Second, true // too many digits for a uint64
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(time.Until(t), 0), true
}
