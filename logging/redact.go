package logging

import (
	"regexp"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// RedactedValue replaces every credential Scrub finds.
const RedactedValue = "[REDACTED]"

// sensitiveWords are matched against keys folded by IsSensitiveKey.
var sensitiveWords = []string{
	"password", "passwd", "passphrase", "pwd", "privatekey",
	"secret",     // secret, secretKey, client_secret
	"token",      // token, accessToken, x-auth-token
	"credential", // credential, credentials
	"cookie",     // cookie, set-cookie
	"accesskey",  // accessKey, access_key_id
	"apikey", "authorization",
}

// IsSensitiveKey reports whether a key looks like it names a credential.
// The key is folded to lower case with every character other than a
// letter or digit removed ("X-Auth-Token" becomes "xauthtoken"); it matches
// if it contains one of: password, passwd, passphrase, pwd, privatekey,
// secret, token, credential, cookie, accesskey, apikey, authorization. So
// "Password", "db_password", "secretKey", "accessKey", "access_key_id",
// "accessToken" and "Authorization" match; "user", "key" and "host" do not.
// It errs on the side of redacting ("tokenTTL" matches too).
func IsSensitiveKey(key string) bool {
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
	// keyValue finds "key: value", "key=value", `"key":"value"`,
	// "key:[value]", "key:<value>" and Go's %+v "Key:value". Group 1 is the
	// key, group 2 the value.
	keyValue = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_.\-]*)["']?\s*[:=]\s*["'\[<(]?([^\s"'\]>)<({},&;]+)`)
	// userinfo finds the password of "scheme://user:password@host" and of
	// "user:password@host" (a DSN) at the start of a word. Group 1 is the
	// password.
	userinfo = regexp.MustCompile(`(?:[A-Za-z][A-Za-z0-9+.\-]*://|^|[\s"'(<\[=,])[^\s:/@"'<>\[\]]*:([^\s/@"'<>]+)@[A-Za-z0-9\[(]`)
)

// Scrub returns s with credentials replaced by "[REDACTED]":
//
//   - the value after each sensitive key (see IsSensitiveKey) written as
//     "key: value", "key=value", `"key":"value"`, "key:[value]",
//     "key:<value>" or "Key:value" (Go's %+v of a struct, such as the SDK's
//     ClientConfig); a value ends at white space, a quote, a comma, '&',
//     ';' or a bracket;
//   - the password of a URL's user information ("http://user:pw@host"
//     becomes "http://user:[REDACTED]@host"), also without a scheme at the
//     start of a word ("root:pw@tcp(db)").
//
// A string without ':' or '=' is returned as is, without allocating.
func Scrub(s string) string {
	if !strings.ContainsAny(s, ":=") || !mayHoldSecret(s) {
		return s
	}
	var spans [][2]int // value spans to replace, in order
	for _, m := range userinfo.FindAllStringSubmatchIndex(s, -1) {
		spans = append(spans, [2]int{m[2], m[3]})
	}
	// Matches may overlap ("http://h/?token=x": the value of "http"
	// holds "token=x"): search again from the end of each key.
	for pos := 0; pos < len(s); {
		m := keyValue.FindStringSubmatchIndex(s[pos:])
		if m == nil {
			break
		}
		if IsSensitiveKey(s[pos+m[2] : pos+m[3]]) {
			spans = append(spans, [2]int{pos + m[4], pos + m[5]})
			pos += m[5]
			continue
		}
		pos += m[3]
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
		b.WriteString(RedactedValue)
		last = sp[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// hints are lower-case pieces of every sensitive key IsSensitiveKey knows,
// and the '@' of user information: text holding none of them (compared
// case-insensitively) has nothing to scrub. (A key with separators inside
// a hint, such as "p_w_d", is missed; IsSensitiveKey would fold it.)
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

// RedactCore wraps core so that credentials never reach it in what rebound
// writes: each entry's message, the text of every error field (zap.Error,
// zap.NamedError) and every string field pass through Scrub, and a string
// or error field whose key is sensitive (see IsSensitiveKey) is written as
// "[REDACTED]". An error field whose text changes is written as a string
// field with the same key. Other field types are passed through: rebound
// logs no credential in them.
//
// Levels, sampling and the decisions of a zapcore.NewTee are those of
// core: RedactCore delegates Check to it and scrubs in a pre-write hook
// (zapcore.CheckedEntry.Before). Fields given to With are scrubbed too.
// The returned core is safe for concurrent use if core is. RedactCore(nil)
// returns a no-op core; wrapping a core RedactCore returned returns it
// unchanged.
func RedactCore(core zapcore.Core) zapcore.Core {
	if core == nil {
		return zapcore.NewNopCore()
	}
	if rc, ok := core.(redactCore); ok {
		return rc
	}
	return redactCore{Core: core}
}

// Redacted returns l with its core wrapped by RedactCore. A nil l means
// zap.NewNop().
func Redacted(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	if _, ok := l.Core().(redactCore); ok {
		return l
	}
	return l.WithOptions(zap.WrapCore(RedactCore))
}

type redactCore struct{ zapcore.Core }

// Level reports the wrapped core's minimum level, for zap.Logger.Level.
func (c redactCore) Level() zapcore.Level { return zapcore.LevelOf(c.Core) }

func (c redactCore) With(fields []zapcore.Field) zapcore.Core {
	return redactCore{Core: c.Core.With(scrubFields(fields))}
}

func (c redactCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.Core.Enabled(ent.Level) {
		return ce
	}
	out := c.Core.Check(ent, ce)
	if out == nil || out == ce {
		return out
	}
	return out.Before(ent, scrubHook)
}

// Write scrubs for callers that write to the core directly.
func (c redactCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	ent, fields = scrubHook(ent, fields)
	return c.Core.Write(ent, fields)
}

func scrubHook(ent zapcore.Entry, fields []zapcore.Field) (zapcore.Entry, []zapcore.Field) {
	ent.Message = Scrub(ent.Message)
	return ent, scrubFields(fields)
}

// scrubFields returns fields with credentials scrubbed. It copies fields
// only if one changes.
func scrubFields(fields []zapcore.Field) []zapcore.Field {
	var out []zapcore.Field
	for i := range fields {
		f := &fields[i]
		var s string
		switch f.Type {
		case zapcore.StringType:
			s = f.String
		case zapcore.ErrorType:
			err, ok := f.Interface.(error)
			if !ok || err == nil {
				continue
			}
			s = err.Error()
		default:
			continue
		}
		red := RedactedValue
		if !IsSensitiveKey(f.Key) {
			if red = Scrub(s); red == s { // an unchanged error keeps its type
				continue
			}
		}
		if out == nil {
			out = make([]zapcore.Field, len(fields))
			copy(out, fields)
		}
		out[i] = zap.String(f.Key, red)
	}
	if out == nil {
		return fields
	}
	return out
}
