package boltstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/failback/boltstore"
)

func TestOpenEmptyPath(t *testing.T) {
	st, err := boltstore.Open("")
	if err == nil {
		st.Close()
	}
	if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "boltstore.Open: path") {
		t.Fatalf(`Open("") = %v, want an *ArgumentError naming path`, err)
	}
}
