package main

import (
	"context"
	"time"
)

// With -nacos the program cannot stop the server: it asks the user to
// restart it and watches the consumers' clients to tell when it went down
// and came back.
const (
	// restartWait is how long it waits for the server to go down.
	restartWait = 60 * time.Second
	// comeBackSlack is added to -down for the server to come back.
	comeBackSlack = 60 * time.Second
	// healthEvery is how often it asks a client whether it is connected.
	// While disconnected, nacos-sdk-go's ServerHealthy makes HTTP requests
	// to the server, so this is not done more often.
	healthEvery = 200 * time.Millisecond
)

// externalOutage waits for the user to restart the external Nacos server.
// The outage starts when the first consumer's client reports the server
// unhealthy and ends when it reports it healthy again (after the server is
// back and the client reconnected, so a little after the real restart). It
// returns zero marks if the server did not go down within restartWait or
// did not come back within -down + comeBackSlack.
func (s *scenario) externalOutage(ctx context.Context) (down, up mark, err error) {
	probe := s.currentSlots()[0].client
	s.prog.phase(s.mode, "await restart")
	s.prog.prompt("\n>>> %s run: restart the Nacos server at %s now: stop it, keep it down for about %v, start it again.\n"+
		">>> Waiting up to %v for it to go down, then up to %v for it to come back.",
		s.mode, s.cfg.nacosAddr, s.cfg.down, restartWait, s.cfg.down+comeBackSlack)
	wait := func(timeout time.Duration, healthy bool) (bool, error) {
		err := pollEvery(ctx, timeout, healthEvery, func() bool { return probe.ServerHealthy() == healthy })
		if ctx.Err() != nil {
			return false, context.Cause(ctx)
		}
		return err == nil, nil
	}
	ok, err := wait(restartWait, false)
	if err != nil || !ok {
		if err == nil {
			s.prog.prompt(">>> the server did not go down within %v: skipping this run's outage", restartWait)
		}
		return mark{}, mark{}, err
	}
	down = s.mark()
	s.prog.phase(s.mode, "registry down")
	if err := s.restartConsumers(ctx); err != nil {
		return mark{}, mark{}, err
	}
	ok, err = wait(s.cfg.down+comeBackSlack, true)
	if err != nil || !ok {
		if err == nil {
			s.prog.prompt(">>> the server did not come back within %v: skipping this run's recovery", s.cfg.down+comeBackSlack)
		}
		return mark{}, mark{}, err
	}
	up = s.mark()
	return down, up, nil
}
