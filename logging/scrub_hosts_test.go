package logging_test

import (
	"strings"
	"testing"

	"github.com/rebound-go/rebound/logging"
)

// User information whose password survived Scrub: a user name holding
// '@' (an e-mail login), a host starting with a byte other than a letter,
// a digit, '[', '(' or '/' (an SRV-style "_etcd._tcp" name, an
// internationalised name), and a URL cut after its '@'.
func TestScrubUserInformationEdges(t *testing.T) {
	for _, in := range []string{
		"http://alice@corp.example:" + secret + "@nacos:8848/nacos",
		"dial alice@corp.example:" + secret + "@tcp(db:3306)/x",
		"etcd://root:" + secret + "@_etcd-server._tcp.example.com",
		"http://u:" + secret + "@ü.example/x",
		"http://u:" + secret + "@-h",
		`Get "http://u:` + secret + `@": missing host`,
		"http://u:" + secret + "@",
	} {
		if out := logging.Scrub(in); strings.Contains(out, secret) {
			t.Errorf("Scrub(%q) = %q: the password survives", in, out)
		}
	}
}
