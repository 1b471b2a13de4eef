package logging

import (
	"regexp"
	"strings"
)

// redactedValue replaces every credential Scrub finds.
const redactedValue = "[REDACTED]"

// sensitiveWords are matched against keys folded by isSensitiveKey.
var sensitiveWords = []string{
	"password", "passwd", "passphrase", "pwd", "privatekey",
	"secret",     // secret, secretKey, client_secret
	"token",      // token, accessToken, x-auth-token
	"credential", // credential, credentials
	"cookie",     // cookie, set-cookie
	"accesskey",  // accessKey, access_key_id
	"apikey", "authorization",
}

// isSensitiveKey reports whether a key looks like it names a credential.
// The key is folded to lower case with every character other than a
// letter or digit removed ("X-Auth-Token" becomes "xauthtoken"); it matches
// if it contains one of: password, passwd, passphrase, pwd, privatekey,
// secret, token, credential, cookie, accesskey, apikey, authorization. So
// "Password", "db_password", "secretKey", "accessKey", "access_key_id",
// "accessToken" and "Authorization" match; "user", "key" and "host" do not.
// It errs on the side of redacting ("tokenTTL" matches too).
func isSensitiveKey(key string) bool {
	if len(key) < 3 {
		return false
	}
	var arr [64]byte
	buf := arr[:0]
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c >= 0x80:
			buf = append(buf, c)
		case 'A' <= c && c <= 'Z':
			buf = append(buf, c+('a'-'A'))
		}
	}
	folded := string(buf) // does not escape: no allocation up to 64 bytes
	for _, w := range sensitiveWords {
		if strings.Contains(folded, w) {
			return true
		}
	}
	return false
}

var (
	// keySep finds a key and its separator: "key: ", "key=", `"key":`,
	// `\"key\":` (JSON inside a quoted string, or quoted twice: `\\\"key\\\":`)
	// and Go's %+v "Key:". Group 1
	// is the key; the value starts at the end of the match.
	keySep = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_.\-]*)(?:\\*["'])?\s*[:=]\s*`)
	// urlUser finds "scheme://user:" and dsnUser "user:" at the start of a
	// word (a DSN such as "root:pw@tcp(db)"): a password may follow. The
	// user may hold '@' (an e-mail login: "alice@corp.example:pw@host").
	urlUser = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/"'<>\[\]]*:`)
	dsnUser = regexp.MustCompile(`(?:^|[\s"'(<\[=,])[^\s:/"'<>\[\]]*:`)
)

// Scrub returns s with credentials replaced by "[REDACTED]": values after
// sensitive keys, Authorization and Cookie header values, and URL
// passwords. Its own output comes back unchanged; it runs in linear time.
// docs/observability.md lists the forms it recognises.
func Scrub(s string) string {
	if !strings.ContainsAny(s, ":=") || !mayHoldSecret(s) {
		return s
	}
	var spans [][2]int // value spans to replace, in order
	for _, re := range []*regexp.Regexp{urlUser, dsnUser} {
		pw := passwordScan{anyHost: re == urlUser}
		for _, m := range re.FindAllStringIndex(s, -1) {
			if end := pw.end(s, m[1]); end > m[1] {
				spans = append(spans, [2]int{m[1], end})
			}
		}
	}
	// A value may hold further pairs ("http://h/?token=x": the value of
	// "http" holds "token=x"); the matches of keySep end at the separator,
	// so they are found too. A key inside a value already redacted is
	// skipped.
	redacted := 0
	for _, m := range keySep.FindAllStringSubmatchIndex(s, -1) {
		key := s[m[2]:m[3]]
		if m[0] < redacted || !isSensitiveKey(key) {
			continue
		}
		if start, end := valueSpan(s, m[1], isHeaderKey(key)); end > start {
			if strings.HasPrefix(s[m[1]:], redactedValue) || strings.HasPrefix(s[start:], redactedValue) ||
				s[m[1]] == '[' && strings.HasPrefix(s[m[1]+1:], redactedValue) {
				continue // scrubbed already: Scrub of its own output changes nothing
			}
			spans = append(spans, [2]int{start, end})
			redacted = end
		}
	}
	if len(spans) == 0 {
		return s
	}
	if len(spans) > 1 {
		sortSpans(spans)
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		if sp[0] < last { // inside a value already replaced
			last = max(last, sp[1])
			continue
		}
		b.WriteString(s[last:sp[0]])
		b.WriteString(redactedValue)
		last = sp[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// passwordScan finds where passwords end. Calls must come in increasing
// order of i; each reuses the scan of the last if it started inside the
// same host part, so that a text of many "user:" candidates is scanned
// once, not once for each.
type passwordScan struct {
	stop, lastAt int  // the host part's end and its last '@' (-1: none), of the last scan
	anyHost      bool // after "scheme://": any '@' ends user information, even one the host part ends with
}

// end returns the end of the password that starts at i (after "user:"):
// the last '@' before the end of the host part that a host follows (any
// '@' after a scheme); i if there is none. The host part ends at a blank, a quote, '<' or '>'; at
// a '/' only if a port comes before it ("http://host:8848/a@b" has no
// password): a password may hold '/' and '@' unescaped
// ("http://u:p/a@ss@host"), which redacts more than the password where a
// path holds an '@'.
func (p *passwordScan) end(s string, i int) int {
	if i >= p.stop {
		p.stop, p.lastAt = len(s), -1
		slash := false
	scan:
		for j := i; j < len(s); j++ {
			switch c := s[j]; c {
			case '/':
				if !slash && isPort(s[i:j]) {
					p.stop = j
					break scan
				}
				slash = true
			case ' ', '\t', '\r', '\n', '\v', '\f', '"', '\'', '<', '>':
				p.stop = j
				break scan
			case '@':
				if p.anyHost || j+1 < len(s) && isHostStart(s[j+1]) {
					p.lastAt = j
				}
			}
		}
	}
	if p.lastAt > i {
		return p.lastAt
	}
	return i
}

// isPort reports whether s is empty or all digits.
func isPort(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isHostStart reports whether c may follow the '@' that ends user
// information without a scheme: a host (also "_srv._tcp", "-h" or a
// non-ASCII name), or '/' for none (go-sql-driver/mysql's
// "user:password@/dbname").
func isHostStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '[' || c == '(' || c == '/' ||
		c == '_' || c == '-' || c == '.' || c == '%' || c >= 0x80
}

// isHeaderKey reports whether the whole value after key is a credential:
// a key that ends with "authorization" or "cookie" (Authorization,
// Proxy-Authorization, Cookie, Set-Cookie), ignoring case.
func isHeaderKey(key string) bool {
	return hasSuffixFold(key, "authorization") || hasSuffixFold(key, "cookie") || hasSuffixFold(key, "cookie2")
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && containsFold(s[len(s)-len(suffix):], suffix)
}

// valueSpan returns the span of the value at v of a sensitive key;
// header: the key is an isHeaderKey.
func valueSpan(s string, v int, header bool) (start, end int) {
	if v >= len(s) {
		return v, v
	}
	if j := goLiteral(s, v); j > v {
		return j, balancedEnd(s, j, '{', '}') // []string{"Bearer x"}, []uint8{0x70}
	}
	switch c := s[v]; c {
	case '"', '\'':
		end := quotedEnd(s, v+1, c, false)
		return skipScheme(s, v+1, end), end
	case '\\':
		n := v
		for n < len(s) && s[n] == '\\' {
			n++
		}
		if n < len(s) && (s[n] == '"' || s[n] == '\'') && isEscapeRun(n-v) {
			// A value quoted inside n-v levels of quoted text.
			end := quotedEndN(s, n+1, s[n], n-v)
			return skipScheme(s, n+1, end), end
		}
	case '{':
		return v + 1, balancedEnd(s, v+1, '{', '}') // an object: all of it
	case '[', '<', '(':
		if !header || v+1 < len(s) && (s[v+1] == '"' || s[v+1] == '\'') {
			// A list: every value (also of a header as JSON:
			// "Cookie":["a=1","b=2"]).
			return v + 1, balancedEnd(s, v+1, c, closer(c))
		}
		v++
	}
	if header {
		end := lineEnd(s, v)
		return skipScheme(s, v, end), end
	}
	if strings.HasPrefix(s[v:], pemBegin) {
		return v, pemEnd(s, v)
	}
	end = bareEnd(s, v)
	if end < len(s) && (s[end] == ' ' || s[end] == '\t') && isScheme(s[v:end]) {
		j := end
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if e := bareEnd(s, j); e > j {
			return j, e // "token: Bearer x": the scheme stays
		}
	}
	return v, end
}

const pemBegin, pemEndLine, pemDashes = "-----BEGIN ", "-----END ", "-----"

// pemEnd returns the end of the PEM block starting at i: after the dashes
// of its END line, or the end of s.
func pemEnd(s string, i int) int {
	e := strings.Index(s[i:], pemEndLine)
	if e < 0 {
		return len(s)
	}
	e += i + len(pemEndLine)
	d := strings.Index(s[e:], pemDashes)
	if d < 0 {
		return len(s)
	}
	return e + d + len(pemDashes)
}

// goLiteral returns where the elements of a Go composite literal of a
// slice type at i begin (after "[]T{"), as %#v writes them; i if there is
// none.
func goLiteral(s string, i int) int {
	if !strings.HasPrefix(s[i:], "[]") {
		return i
	}
	for j := i + 2; j < len(s); j++ {
		switch c := s[j]; {
		case c == '{':
			return j + 1
		case isSchemeChar(c), c == '_', c == '.', c == '*', c == '[', c == ']':
		default:
			return i
		}
	}
	return i
}

func closer(c byte) byte {
	switch c {
	case '[':
		return ']'
	case '<':
		return '>'
	}
	return ')'
}

// balancedEnd returns where the bracketed text starting at i (after its
// opening bracket open) ends: at the matching close, skipping quoted
// strings; or at the end of s.
func balancedEnd(s string, i int, open, close byte) int {
	depth := 1
	for i < len(s) {
		switch c := s[i]; c {
		case open:
			depth++
		case close:
			if depth--; depth == 0 {
				return i
			}
		case '"':
			if i == 0 || s[i-1] != '\\' {
				i = quotedEnd(s, i+1, c, false)
			}
		}
		i++
	}
	return len(s)
}

// isEscapeRun reports whether n backslashes before a quote are how a
// quote is written inside quoted text (1, 3, 7, ...: each level of
// quoting doubles the backslashes and adds one).
func isEscapeRun(n int) bool { return n > 0 && (n+1)&n == 0 }

// quotedEndN returns where the quoted text starting at i ends, its quote
// q written with n backslashes before it (n is 0 or an isEscapeRun): at
// the first backslash of the closing quote, or at the end of s. A quote
// closes when the run of r backslashes before it is n modulo 2(n+1); a
// run one level deeper, 2n+1, is a quote inside the value.
func quotedEndN(s string, i int, q byte, n int) int {
	start := i
	for ; i < len(s); i++ {
		if s[i] != q {
			continue
		}
		r := 0
		for i-r-1 >= start && s[i-r-1] == '\\' {
			r++
		}
		if r%(2*(n+1)) == n {
			return i - n
		}
	}
	return len(s)
}

// bareEnd returns the end of an unquoted value starting at i.
func bareEnd(s string, i int) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\n', '\v', '\f', '"', '\'', ']', '>', ')', '<', '(', '{', '}', ',', '&', ';':
			return i
		}
	}
	return i
}

// quotedEnd returns where the quoted text starting at i (after the
// opening quote q) ends: at the closing quote, or at the end of s. A
// backslash escapes the next character. escaped: the text is itself inside
// a quoted string (`\"password\":\"x\"`), its quote written `\"` and its
// backslash `\\`; it ends at the `\"` that closes it.
func quotedEnd(s string, i int, q byte, escaped bool) int {
	for i < len(s) {
		c := s[i]
		switch {
		case !escaped && c == '\\':
			i += 2
		case !escaped && c == q:
			return i
		case escaped && c == '\\' && i+1 < len(s) && s[i+1] == q:
			return i
		case escaped && c == '\\' && i+1 < len(s) && s[i+1] == '\\':
			// An inner backslash: it escapes the next inner character,
			// which may be written escaped (`\\\"` is an inner `\"`).
			i += 2
			if i+1 < len(s) && s[i] == '\\' {
				i += 2
			} else {
				i++
			}
		case escaped && c == '\\':
			i += 2
		default:
			i++
		}
	}
	return len(s)
}

// lineEnd returns the end of a header value starting at i: a line break,
// a closing bracket, or a quote that does not open a parameter's quoted
// value (`response="x"`), which it skips.
func lineEnd(s string, i int) int {
	start := i
	for i < len(s) {
		switch c := s[i]; c {
		case '\r', '\n', ']', ')', '}', '>':
			return i
		case '"', '\'':
			if i == start || s[i-1] != '=' {
				return i
			}
			i = quotedEnd(s, i+1, c, false) + 1
			continue
		case '\\':
			if i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\'') {
				if i == start || s[i-1] != '=' {
					return i
				}
				i = quotedEnd(s, i+2, s[i+1], true) + 2
				continue
			}
		}
		i++
	}
	return min(i, len(s))
}

// skipScheme returns where the credentials of the value span [start, end)
// begin: after a leading authentication scheme and the blanks after it,
// if more follows; else start.
func skipScheme(s string, start, end int) int {
	i := start
	for i < end && isSchemeChar(s[i]) {
		i++
	}
	if i == start || i >= end || (s[i] != ' ' && s[i] != '\t') || !isScheme(s[start:i]) {
		return start
	}
	for i < end && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i == end {
		return start
	}
	return i
}

func isSchemeChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-'
}

// schemes are HTTP authentication schemes (IANA's registry and common
// others), in lower case.
var schemes = []string{
	"basic", "bearer", "concealed", "digest", "dpop", "gnap", "hoba", "mutual", "negotiate", "oauth",
	"privatetoken", "scram-sha-1", "scram-sha-256", "vapid",
	"ntlm", "token", "aws4-hmac-sha256", "sharedkey", "apikey", "jwt", "ssws",
}

func isScheme(w string) bool {
	for _, sc := range schemes {
		if len(w) == len(sc) && containsFold(w, sc) {
			return true
		}
	}
	return false
}

// hints are lower-case pieces of every sensitive key isSensitiveKey knows,
// and the '@' of user information: text holding none of them (compared
// case-insensitively) has nothing to scrub. (A key with separators inside
// a hint, such as "p_w_d", is missed; isSensitiveKey would fold it.)
var hints = []string{"pass", "pwd", "secret", "token", "credential", "cookie", "access", "api", "auth", "private", "@"}

func mayHoldSecret(s string) bool {
	for _, h := range hints {
		if containsFold(s, h) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains the lower-case ASCII needle,
// ignoring ASCII case, without allocating.
func containsFold(s, needle string) bool {
	n := len(needle)
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for ; j < n; j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != needle[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}

func sortSpans(sp [][2]int) {
	for i := 1; i < len(sp); i++ { // insertion sort: a handful of spans
		for j := i; j > 0 && sp[j][0] < sp[j-1][0]; j-- {
			sp[j], sp[j-1] = sp[j-1], sp[j]
		}
	}
}
