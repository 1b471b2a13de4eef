module github.com/rebound-go/rebound

go 1.26.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.16.0
)

require github.com/stretchr/testify v1.8.1 // indirect
