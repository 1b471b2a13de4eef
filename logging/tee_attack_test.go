package logging_test

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rebound-go/rebound/logging"
)

// RedactCore is gone; CHANGELOG says wrap the core in a logger,
// logging.Redacted(zap.New(core)). A RedactCore user who tee'd a redacted
// sink next to another one takes that logger's Core() into the tee. The
// redacted core then writes credentials unscrubbed whenever a core before
// it in the tee accepted the entry: its Check sees the CheckedEntry it
// was given come back (AddCore returns the same pointer) and adds no
// scrub hook.
func TestRedactedCoreInTeeLeaks(t *testing.T) {
	plainCore, _ := observer.New(zapcore.DebugLevel)
	secretCore, secretLogs := observer.New(zapcore.DebugLevel)
	redacted := logging.Redacted(zap.New(secretCore)).Core()

	alone := zap.New(redacted)
	alone.Info("dial postgres://app:hunter2@db:5432/x", zap.String("password", "hunter2"))

	teed := zap.New(zapcore.NewTee(plainCore, redacted))
	teed.Info("dial postgres://app:hunter2@db:5432/x", zap.String("password", "hunter2"))

	if n := secretLogs.Len(); n != 2 {
		t.Fatalf("the redacted core got %d entries, want 2", n)
	}
	for i, e := range secretLogs.All() {
		s := e.Message
		for k, v := range e.ContextMap() {
			s += " " + k + "=" + v.(string)
		}
		if strings.Contains(s, "hunter2") {
			t.Errorf("entry %d (%s) written to the redacted core unscrubbed: %s", i, []string{"alone", "in a tee"}[i], s)
		}
	}
}
