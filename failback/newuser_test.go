package failback

import (
	"errors"
	"strings"
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/cluster"
)

// A nil *cluster.RegistryDirectory in the interface used to be accepted,
// and every Invoke then ran into it.
func TestNewNilPointerDirectory(t *testing.T) {
	var dir *cluster.RegistryDirectory
	fb, err := New(dir)
	if fb != nil {
		fb.Close()
	}
	if !errors.Is(err, rebound.ErrInvalidArgument) || !strings.Contains(err.Error(), "failback.New: dir is a nil pointer") {
		t.Fatalf("New = %v, want an *ArgumentError naming dir", err)
	}
}
