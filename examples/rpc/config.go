package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// config is the parsed command line.
type config struct {
	n         int
	rate      float64
	senders   int
	providers int
	crash     bool
	killAt    float64
	down      time.Duration

	retries     int
	maxTasks    int
	workers     int
	backoff     time.Duration
	backoffMax  time.Duration
	callTimeout time.Duration

	shedEvery  int
	retryAfter int
	badEvery   int

	drain    time.Duration
	shutdown time.Duration
	startup  time.Duration

	nacos    string
	service  string
	progress time.Duration
	logLevel string
	sdkLog   string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("rpc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.n, "n", 300, "notifications to send")
	fs.Float64Var(&c.rate, "rate", 100, "notifications per second, sent at a steady pace")
	fs.IntVar(&c.senders, "senders", 4, "goroutines calling Invoke")
	fs.IntVar(&c.providers, "providers", 3, "providers serving at a time")
	fs.BoolVar(&c.crash, "crash", true, "crash every provider midway and start replacements on new ports")
	fs.Float64Var(&c.killAt, "kill-at", 0.4, "crash after this fraction of -n was sent")
	fs.DurationVar(&c.down, "down", time.Second, "time from the crash to starting the replacements")
	fs.IntVar(&c.retries, "retries", 4, "failback retries per notification after its first attempt")
	fs.IntVar(&c.maxTasks, "max-tasks", 100, "failback task limit (queued + running)")
	fs.IntVar(&c.workers, "workers", 8, "failback retry workers")
	fs.DurationVar(&c.backoff, "backoff", 200*time.Millisecond, "failback backoff: first ceiling (full jitter, doubling)")
	fs.DurationVar(&c.backoffMax, "backoff-max", 2*time.Second, "failback backoff: cap")
	fs.DurationVar(&c.callTimeout, "timeout", 2*time.Second, "timeout of each call to a provider")
	fs.IntVar(&c.shedEvery, "shed-every", 20, "each provider answers every N-th call with 503 and Retry-After (0: never)")
	fs.IntVar(&c.retryAfter, "retry-after", 1, "the providers' Retry-After, in seconds")
	fs.IntVar(&c.badEvery, "bad-every", 100, "every N-th notification has no recipient, which providers answer with 400 (0: never)")
	fs.DurationVar(&c.drain, "drain", 10*time.Second, "after the last send, how long to wait for pending retries before closing")
	fs.DurationVar(&c.shutdown, "shutdown-timeout", 5*time.Second, "bound of each shutdown step (failback Close, manager Shutdown, providers)")
	fs.DurationVar(&c.startup, "startup-timeout", 20*time.Second, "bound of the wait for the consumer to see the first providers")
	fs.StringVar(&c.nacos, "nacos", "", "host:port of a Nacos server's HTTP API (gRPC at port+1000); empty: an embedded nacostest server")
	fs.StringVar(&c.service, "service", "rebound.example.notify", "service name the providers register")
	fs.DurationVar(&c.progress, "progress", 500*time.Millisecond, "interval of the live progress line (0: none)")
	fs.StringVar(&c.logLevel, "log", "error", `level of the zap log written to stderr (debug, info, warn, error; "off": none)`)
	fs.StringVar(&c.sdkLog, "sdk-log", "off", "level of nacos-sdk-go's own log, sent to the same zap log (it logs an ERROR for every client it closes)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return c, c.validate()
}

func (c config) validate() error {
	var errs []error
	check := func(ok bool, flag, rule string) {
		if !ok {
			errs = append(errs, fmt.Errorf("-%s must be %s", flag, rule))
		}
	}
	check(c.n >= 1, "n", "at least 1")
	check(c.rate > 0 && c.rate <= 1e6, "rate", "in (0, 1e6]")
	check(c.senders >= 1, "senders", "at least 1")
	check(c.providers >= 1 && c.providers <= 50, "providers", "in [1, 50]")
	check(c.killAt >= 0 && c.killAt <= 1, "kill-at", "in [0, 1]")
	check(c.down >= 0, "down", "non-negative")
	check(c.retries >= 0, "retries", "non-negative")
	check(c.maxTasks >= 1, "max-tasks", "at least 1")
	check(c.workers >= 1, "workers", "at least 1")
	check(c.backoff >= time.Millisecond, "backoff", "at least 1ms")
	check(c.backoffMax >= c.backoff, "backoff-max", "at least -backoff")
	check(c.callTimeout > 0, "timeout", "positive")
	check(c.shedEvery >= 0, "shed-every", "non-negative")
	check(c.retryAfter >= 0, "retry-after", "non-negative")
	check(c.badEvery >= 0, "bad-every", "non-negative")
	check(c.drain >= 0, "drain", "non-negative")
	check(c.shutdown > 0, "shutdown-timeout", "positive")
	check(c.startup > 0, "startup-timeout", "positive")
	check(c.service != "" && !strings.ContainsAny(c.service, "@ "), "service", "a non-empty name without '@' or spaces")
	check(c.progress >= 0, "progress", "non-negative")
	if _, err := parseLevel(c.logLevel); err != nil {
		errs = append(errs, fmt.Errorf("-log: %w", err))
	}
	if _, err := parseLevel(c.sdkLog); err != nil {
		errs = append(errs, fmt.Errorf("-sdk-log: %w", err))
	}
	return errors.Join(errs...)
}

func parseLevel(s string) (zapcore.Level, error) {
	if s == "off" {
		return zapcore.InvalidLevel, nil
	}
	return zapcore.ParseLevel(s)
}

// newLogger returns the run's logger, writing to w (never zap's global
// logger).
func newLogger(w io.Writer, level string) *zap.Logger {
	lvl, _ := parseLevel(level)
	if lvl == zapcore.InvalidLevel {
		return zap.NewNop()
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.TimeKey = "T"
	enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), lvl))
}
