package logging

import "time"

// The messages a Loop logs, under the names the _test package matches by.
const (
	MsgFailing      = msgFailing
	MsgStillFailing = msgStillFailing
	MsgRetry        = msgRetry
	MsgRecovered    = msgRecovered
	MsgSucceeded    = msgSucceeded
	MsgGaveUp       = msgGaveUp
	MsgStopped      = msgStopped
)

// Unexported names the _test package checks.
var (
	RedactCore     = newRedactCore
	IsSensitiveKey = isSensitiveKey
)

const RedactedValue = redactedValue

// The typed calls the tests make; the package's callers use Observe.
func (lp *Loop) Failed(attempt int, err error, delay time.Duration) {
	lp.failed(attempt, err, delay, false)
}
func (lp *Loop) Succeeded(attempts int)         { lp.succeeded(attempts, false) }
func (lp *Loop) GaveUp(attempts int, err error) { lp.gaveUp(attempts, err, false) }
