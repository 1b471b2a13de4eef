package table

import (
	"strings"
	"testing"
)

func TestPrint(t *testing.T) {
	var b strings.Builder
	if err := Print(&b, [][]string{{"", "rebound", "baseline"}, {"failed RPCs", "0", "4"}, {"a longer label", "12", "7"}}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"                rebound  baseline\n" +
		"failed RPCs     0        4\n" +
		"a longer label  12       7\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
