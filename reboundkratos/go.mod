module github.com/rebound-go/rebound/reboundkratos

go 1.26.0

require github.com/rebound-go/rebound v0.0.0-00010101000000-000000000000

replace github.com/rebound-go/rebound => ..

replace github.com/rebound-go/rebound/subscriber/nacos => ../subscriber/nacos

require (
	github.com/go-kratos/kratos/v2 v2.8.3
	go.uber.org/zap v1.28.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.opentelemetry.io/otel v1.45.0 // indirect
	go.opentelemetry.io/otel/metric v1.45.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/rebound-go/rebound/subscriber/etcd => ../subscriber/etcd
