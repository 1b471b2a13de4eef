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
