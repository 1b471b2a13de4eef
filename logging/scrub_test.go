package logging_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/rebound-go/rebound/logging"
)

// Credentials that Scrub left in part: the token after an authentication
// scheme, every cookie but the first, quoted values with blanks or escaped
// quotes, URL passwords holding '@'.
func TestScrubHeadersQuotesAndPasswords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// Authorization headers: the scheme stays, the credentials go.
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.c2ln", "Authorization: Bearer [REDACTED]"},
		{"Authorization: Basic dXNlcjpodW50ZXIy", "Authorization: Basic [REDACTED]"},
		{"authorization: bearer abc\r\nHost: nacos", "authorization: bearer [REDACTED]\r\nHost: nacos"},
		{"Proxy-Authorization: Basic dXNlcjpodW50ZXIy", "Proxy-Authorization: Basic [REDACTED]"},
		{"Authorization: token ghp_abc", "Authorization: token [REDACTED]"},
		{"Authorization: ghp_abc", "Authorization: [REDACTED]"},
		{"Authorization: ghp_abc ghp_def", "Authorization: [REDACTED]"}, // no known scheme: all of it
		{"Authorization: Bearer", "Authorization: [REDACTED]"},
		{`Authorization: Digest username="nacos", realm="r", nonce="n", uri="/", response="6629fae4"`, "Authorization: Digest [REDACTED]"},
		{"map[Authorization:[Bearer abc] User-Agent:[Go-http-client/1.1]]", "map[Authorization:[Bearer [REDACTED]] User-Agent:[Go-http-client/1.1]]"},
		{`request header "Authorization: Bearer abc" refused: 401`, `request header "Authorization: Bearer [REDACTED]" refused: 401`},
		{`{"Authorization":"Bearer abc","n":1}`, `{"Authorization":"Bearer [REDACTED]","n":1}`},
		{"authorization=Bearer abc", "authorization=Bearer [REDACTED]"},
		{"token: Bearer abc user: nacos", "token: Bearer [REDACTED] user: nacos"},
		// Cookies: all of them.
		{"Cookie: a=1; SESSIONID=x", "Cookie: [REDACTED]"},
		{"Cookie: a=1; SESSIONID=x\nAccept: */*", "Cookie: [REDACTED]\nAccept: */*"},
		{"Set-Cookie: SESSIONID=x; Path=/; HttpOnly", "Set-Cookie: [REDACTED]"},
		{`Set-Cookie: id="a b"; Path=/`, "Set-Cookie: [REDACTED]"},
		{"map[Cookie:[a=1; SESSIONID=x] Accept:[*/*]]", "map[Cookie:[[REDACTED]] Accept:[*/*]]"},
		// Quoted values, whole.
		{`password: "hunter 2" user: nacos`, `password: "[REDACTED]" user: nacos`},
		{`{"password":"a\"b c","user":"n"}`, `{"password":"[REDACTED]","user":"n"}`},
		{`{"password":"a\\","user":"n"}`, `{"password":"[REDACTED]","user":"n"}`},
		{`secretKey = 'it\'s a secret', region=cn`, `secretKey = '[REDACTED]', region=cn`},
		{`password: "unterminated secret`, `password: "[REDACTED]`},
		{`password: ""`, `password: ""`},
		// JSON inside a quoted string (Go's %q of a request body).
		{fmt.Sprintf("body %q", `{"password":"a\"b c","user":"n"}`), `body "{\"password\":\"[REDACTED]\",\"user\":\"n\"}"`},
		{fmt.Sprintf("body %q", `{"password":"a\\","user":"n"}`), `body "{\"password\":\"[REDACTED]\",\"user\":\"n\"}"`},
		// URL and DSN passwords holding '@' (net/url takes the last '@').
		{"http://user:p@ss@host/x", "http://user:[REDACTED]@host/x"},
		{`Get "http://nacos:a@b:c@10.0.0.1:8848/nacos": refused`, `Get "http://nacos:[REDACTED]@10.0.0.1:8848/nacos": refused`},
		{"root:p@ss@tcp(db:3306)/x", "root:[REDACTED]@tcp(db:3306)/x"},
		{"etcd://root:pa/ss@host:2379/x", "etcd://root:[REDACTED]@host:2379/x"},
		{"root:pa/s@s@tcp(db:3306)/x", "root:[REDACTED]@tcp(db:3306)/x"},
		{"http://u:pw@host/path@x", "http://u:[REDACTED]@x"}, // more than the password: a path holding '@'
		{"http://u:pw@host/path", "http://u:[REDACTED]@host/path"},
		{"http://host:/path@x and http://host:8848/a/b@c", "http://host:/path@x and http://host:8848/a/b@c"},
		{"etcd://root:s3cr3t@host:2379 and https://u:p@x/?password=q", "etcd://root:[REDACTED]@host:2379 and https://u:[REDACTED]@x/?password=[REDACTED]"},
		// What stays.
		{"no userinfo: http://host:8848/path@x", "no userinfo: http://host:8848/path@x"},
		{"mail admin@example.com: cookie jar full", "mail admin@example.com: cookie jar full"},
		{"WWW-Authenticate: Basic realm=nacos", "WWW-Authenticate: Basic realm=nacos"},
		{"disableCookies: true, timeout=5s", "disableCookies: [REDACTED], timeout=5s"}, // sensitive, not a header
		{"Set-Cookie2: a=1; b=2", "Set-Cookie2: [REDACTED]"},
	} {
		if got := logging.Scrub(tc.in); got != tc.want {
			t.Errorf("Scrub(%q) =\n  %q\nwant\n  %q", tc.in, got, tc.want)
		}
	}
}

// Scrub is linear in the length of its text. A run of "x@h:" or
// "=a:x@h" took minutes at 100 KB: the old user-information pattern was
// tried again from each "user:" and ran to the text's end each time.
func BenchmarkScrubLong(b *testing.B) {
	for _, unit := range []string{"x@h:", "=a:x@h", "password=\"", "Authorization: Bearer ", "a:"} {
		in := strings.Repeat(unit, 64<<10/len(unit))
		b.Run(strings.Trim(strconv.Quote(unit), `"`), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				logging.Scrub(in)
			}
		})
	}
}

// scrubTemplates plant a secret where a credential goes. enc turns the
// fuzzer's bytes into a secret the template's syntax can hold (a bare
// value cannot hold a blank, a quoted one holds anything, escaped).
var scrubTemplates = []struct {
	format string
	enc    func(string) string
}{
	{"password=%s", bare},
	{"password: %s user: nacos", bare},
	{"GET /v1?accessToken=%s&ns=public", bare},
	{"{Username:nacos Password:%s AccessKey:AK Endpoint:}", bare},
	{"credentials:<%s> next", bare},
	{"Authorization: Bearer %s", token68},
	{"Authorization: Basic %s\r\nHost: nacos", token68},
	{"Authorization: %s", token68},
	{"Proxy-Authorization: Negotiate %s", token68},
	{"map[Authorization:[Bearer %s] User-Agent:[Go]]", token68},
	{`request header "Authorization: Bearer %s" refused`, token68},
	{"token: Bearer %s user: nacos", token68},
	{"Cookie: a=1; SESSIONID=%s", headerValue},
	{"Cookie: %s; b=2\r\nHost: x", headerValue},
	{"Set-Cookie: id=%s; Path=/; HttpOnly", headerValue},
	{"map[Cookie:[a=1; SESSIONID=%s] Accept:[*/*]]", headerValue},
	{`Authorization: Digest username="u", response="%s", uri="/"`, headerValue},
	{"password: %s user: nacos", strconv.Quote},
	{`{"password":%s,"user":"n"}`, jsonQuote},
	{`{"Authorization":%s}`, func(s string) string { return jsonQuote("Bearer " + s) }},
	{"secretKey = %s, region=cn", singleQuote},
	{"body %s", func(s string) string { return strconv.Quote(`{"password":` + jsonQuote(s) + `}`) }},
	{`Post "http://nacos:%s@10.0.0.1:8848/nacos": refused`, urlPassword},
	{"etcd://root:%s@host:2379 next", urlPassword},
	{"dsn root:%s@tcp(db:3306)/x", urlPassword},
	{"[mysql] root:%s@/orders", urlPassword},
	{`{"Cookie":["a=1",%s],"Accept":["*/*"]}`, jsonQuote},
	{`metadata.MD{"authorization":[]string{%s}}`, strconv.Quote},
	{"map[x-api-key:[%s k2] user:[n]]", bare},
	{`{"password":{"value":%s},"user":"n"}`, jsonQuote},
	{"body %s", func(s string) string { return strconv.Quote(strconv.Quote(`{"password":` + jsonQuote(s) + `}`)) }},
	{"grpc://alice@corp.example:%s@[fe80::1%%25eth0]:9000/x", urlPassword},
	{"x-y.z+tls://u:%s@_etcd._tcp.example.com", urlPassword},
	{"dial user:%s@10.0.0.1:9000 refused", urlPassword},
	{`Get "http://u:%s@": missing host`, urlPassword},
}

func keep(s string, drop string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(drop, r) || r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

func bare(s string) string        { return keep(s, " \"'[]<>(){},&;\u0085\u00a0") }
func headerValue(s string) string { return keep(s, "\"'\\])}>\u0085\u00a0\u2028\u2029") }
func urlPassword(s string) string { return keep(s, " \"'<>\u0085\u00a0") }
func token68(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-._~+/=", r) {
			return r
		}
		return -1
	}, s)
}
func jsonQuote(s string) string { b, _ := json.Marshal(s); return string(b) }
func singleQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// A secret planted in a template never survives Scrub, not even in part:
// the secret is marked at its start, middle and end, and no marker may
// remain.
func FuzzScrub(f *testing.F) {
	for _, s := range []string{"hunter2", "hunter 2", `a"b c`, `a\"b`, `x\`, "p@ss@w0rd", "a=1; b=2", "Bearer x", "é\u2028x", ""} {
		f.Add(s, uint8(0))
	}
	for i := range scrubTemplates {
		f.Add("eyJhbGciOiJIUzI1NiJ9.e30.c2ln", uint8(i))
	}
	f.Fuzz(func(t *testing.T, fuzzed string, which uint8) {
		tpl := scrubTemplates[int(which)%len(scrubTemplates)]
		half := len(fuzzed) / 2
		secret := "S3CR" + fuzzed[:half] + "M1DL" + fuzzed[half:] + "T3ND"
		in := fmt.Sprintf(tpl.format, tpl.enc(secret))
		out := logging.Scrub(in)
		for _, mark := range []string{"S3CR", "M1DL", "T3ND"} {
			if strings.Contains(out, mark) {
				t.Fatalf("Scrub(%q) = %q: %s of the secret survives", in, out, mark)
			}
		}
	})
}
