package logging_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rebound-go/rebound/logging"
)

// Values Scrub left whole or in part: a Go literal (%#v of gRPC metadata
// or of a []byte), a list of several values, an object, JSON quoted twice,
// a PEM block.
func TestScrubCompositeValues(t *testing.T) {
	twice := fmt.Sprintf("%q", fmt.Sprintf("%q", `{"password":"SECRETX word","user":"n"}`))
	for _, tc := range []struct{ in, want string }{
		{`metadata.MD{"authorization":[]string{"Bearer SECRETX"}}`, `metadata.MD{"authorization":[]string{[REDACTED]}}`},
		{fmt.Sprintf("%#v", struct{ Password []byte }{[]byte("SECRETX")}), `struct { Password []uint8 }{Password:[]uint8{[REDACTED]}}`},
		{"map[x-api-key:[SECRETX SECRETY] user:[n]]", "map[x-api-key:[[REDACTED]] user:[n]]"},
		{`{"password":{"value":"SECRETX"},"user":"n"}`, `{"password":{[REDACTED]},"user":"n"}`},
		{"body " + twice, strings.Replace(twice, "SECRETX word", "[REDACTED]", 1)},
		{"{PrivateKey:-----BEGIN RSA PRIVATE KEY-----\nMIIE SECRETX\n-----END RSA PRIVATE KEY----- User:n}", "{PrivateKey:[REDACTED] User:n}"},
		{"privateKey: -----BEGIN PRIVATE KEY----- SECRETX", "privateKey: [REDACTED]"},
		// An http.Header as JSON: every value of a credential header.
		{`{"Authorization":["Bearer SECRETX"],"Cookie":["a=1","SID=SECRETY"],"Accept":["*/*"]}`, `{"Authorization":[[REDACTED]],"Cookie":[[REDACTED]],"Accept":["*/*"]}`},
		// go-sql-driver/mysql's DSN without a host ("user:password@/dbname").
		{"[mysql] dial root:SECRETX@/orders failed", "[mysql] dial root:[REDACTED]@/orders failed"},
		{"mysql://root:SECRETX@/orders", "mysql://root:[REDACTED]@/orders"},
	} {
		if tc.in == "body "+twice {
			tc.want = "body " + tc.want
		}
		got := logging.Scrub(tc.in)
		if got != tc.want {
			t.Errorf("Scrub(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "SECRET") {
			t.Errorf("Scrub(%q) kept a secret: %q", tc.in, got)
		}
	}
}

// Scrub of a text Scrub returned changed it again: "password: [REDACTED]"
// became "password: [[REDACTED]]", "Authorization: Bearer [REDACTED]"
// gained a stray bracket. A text scrubbed twice (an error text from a
// status page logged through a redacting logger) reads as scrubbed once.
func TestScrubTwiceIsScrubOnce(t *testing.T) {
	for _, in := range []string{
		"password: secret", "password=[secret]", "Authorization: Bearer x", `{"password":"x"}`, "http://u:p@h/",
		"Cookie: a=b", "map[token:[a b]]", "u:p@tcp(h)/d", "password={x}", `metadata.MD{"authorization":[]string{"Bearer x"}}`,
		"privateKey: -----BEGIN KEY----- x -----END KEY-----", `{"Cookie":["a=1"]}`,
	} {
		once := logging.Scrub(in)
		if twice := logging.Scrub(once); twice != once {
			t.Errorf("Scrub(%q) = %q, and again %q", in, once, twice)
		}
	}
}
