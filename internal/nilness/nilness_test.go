package nilness

import (
	"io"
	"strings"
	"testing"
)

func TestIs(t *testing.T) {
	var p *strings.Reader
	var r io.Reader = p
	var m map[string]int
	var f func()
	for _, tc := range []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"typed nil pointer", p, true},
		{"interface holding a nil pointer", r, true},
		{"nil map", m, true},
		{"nil func", f, true},
		{"pointer", strings.NewReader("x"), false},
		{"value", 3, false},
		{"empty string", "", false},
	} {
		if got := Is(tc.v); got != tc.want {
			t.Errorf("%s: Is = %v, want %v", tc.name, got, tc.want)
		}
	}
}
