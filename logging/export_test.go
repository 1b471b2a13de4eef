package logging

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
