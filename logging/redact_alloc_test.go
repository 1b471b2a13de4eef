//go:build !race

// Allocation counts are checked without the race detector only: under
// -race, sync.Pool drops items at random, so zap's pooled buffers and
// entries allocate whatever the redaction does.

package logging_test

import (
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rebound-go/rebound/logging"
)

// Fields that carry nothing to scrub cost no allocation.
func TestRedactedCleanFieldsDoNotAllocate(t *testing.T) {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(discard{}), zapcore.InfoLevel)
	l := logging.Redacted(zap.New(core))
	fields := []zap.Field{zap.String("key", "DEFAULT_GROUP/orders"), zap.Int("attempt", 3), zap.Bool("ok", true),
		zap.Error(errors.New("connection refused"))}
	if n := testing.AllocsPerRun(100, func() {
		if ce := l.Check(zapcore.InfoLevel, "subscribe failed"); ce != nil {
			ce.Write(fields...)
		}
	}); n != 0 {
		t.Errorf("a line of clean string, int, bool and error fields: %v allocations, want 0", n)
	}
}
