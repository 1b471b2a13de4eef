package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Row labels of the table (the test looks rows up by these).
const (
	rowDown        = "registry down for (measured)"
	rowCPU         = "CPU used by the process during the outage"
	rowCPUAfter    = "CPU used by the process during recovery"
	rowCallsDown   = "subscribe calls by consumers during the outage"
	rowCallsAfter  = "subscribe calls by consumers during recovery"
	rowSubReqs     = "SubscribeServiceRequests at the registry, recovery"
	rowRequests    = "all requests at the registry during recovery"
	rowPeak        = "peak registry requests in any 100 ms, recovery"
	rowRejected    = "subscribes rejected by TPS control (reported ok)"
	rowConverged   = "restart -> every subscription back, right list"
	rowHeld        = "restart -> every subscription held by the registry"
	rowConfirmed   = "restart -> ... and confirmed by the consumer code"
	rowNotInPlace  = "subscriptions missing at the end of recovery"
	rowProviders   = "restart -> providers re-registered"
	rowProvMissing = "provider instances missing at the end of recovery"
	rowRegReqs     = "register requests (InstanceRequests), recovery"
	rowRegRejected = "registers rejected by TPS control (reported ok)"
	rowLost        = "notifications lost (change after recovery)"
	rowDuplicated  = "notifications duplicated"
	rowEmpties     = "empty lists to listeners that had instances"
	rowFirstEmpty  = "empty first lists (consumers started in outage)"
	rowGaveUp      = "subscriptions abandoned by the consumer code"
	rowEmptied     = "a service emptied after recovery -> seen empty"
	notAvailable   = "n/a"
	notConvergedIn = "not within "
)

// printTable prints the verdict, what the scenario was, then one row per
// measure and one column per run.
func printTable(w io.Writer, cfg config, results []result) error {
	printVerdict(w, cfg, results)
	registry := "embedded Nacos (nacostest, real gRPC over loopback)"
	if cfg.nacosAddr != "" {
		registry = "Nacos at " + cfg.nacosAddr + ", restarted by hand"
	}
	fmt.Fprintf(w, "Registry outage: %d consumers x %d services = %d subscriptions, %d providers; %s\n",
		cfg.clients, cfg.subs, cfg.clients*cfg.subs, cfg.providers, registry)
	if cfg.nacosAddr == "" {
		fmt.Fprintf(w, "down for %v, restarted empty", cfg.down)
		switch {
		case cfg.tpsFirst > 0 && cfg.regReject > 0:
			fmt.Fprintf(w, "; its TPS control rejects the first %d subscribes and the first %d registers of every new connection (Nacos' own response types: nacos-sdk-go reports success)", cfg.tpsFirst, cfg.regReject)
		case cfg.tpsFirst > 0:
			fmt.Fprintf(w, "; its TPS control rejects the first %d subscribes of every new connection (Nacos' own response type: nacos-sdk-go reports success)", cfg.tpsFirst)
		case cfg.regReject > 0:
			fmt.Fprintf(w, "; its TPS control rejects the first %d registers of every new connection (Nacos' own response type: nacos-sdk-go reports success)", cfg.regReject)
		}
	} else {
		fmt.Fprintf(w, "restarted by hand (asked for about %v down)", cfg.down)
	}
	switch {
	case cfg.restarts == 1:
		fmt.Fprintf(w, "; 1 consumer restarts while it is down")
	case cfg.restarts > 1:
		fmt.Fprintf(w, "; %d consumers restart while it is down", cfg.restarts)
	}
	fmt.Fprintf(w, ".\nAll clients: nacos-sdk-go v2.3.2 defaults, UpdateCacheWhenEmpty=%t.\n", cfg.updateCacheWhenEmpty)
	naive := "for { err := client.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: onChange}); if err == nil { break }; time.Sleep(time.Second) }"
	if cfg.naiveNoSleep {
		naive = fmt.Sprintf("for { err := client.Subscribe(&vo.SubscribeParam{ServiceName: svc, SubscribeCallback: onChange}); if err == nil { break } } (no sleep; capped at %d calls per service)", cfg.noSleepCap)
	}
	if slices.Contains(cfg.modes, sdkMode) {
		fmt.Fprintf(w, "sdk:     at start-up, per service: client.Subscribe(...) once, error ignored; nacos-sdk-go's redo does the rest.\n")
		fmt.Fprintf(w, "         providers: client.RegisterInstance(...) once per service; nacos-sdk-go's redo re-registers.\n")
	}
	if slices.Contains(cfg.modes, naiveMode) {
		fmt.Fprintf(w, "naive:   at start-up, per service: %s\n", naive)
		fmt.Fprintf(w, "         then relies on nacos-sdk-go's own redo after a reconnect.\n")
		fmt.Fprintf(w, "         providers: for { _, err := client.RegisterInstance(...); if err == nil { break }; time.Sleep(time.Second) } (the bool not checked), then the SDK's redo.\n")
	}
	if slices.Contains(cfg.modes, reboundMode) {
		fmt.Fprintf(w, "rebound: one subscriber.Manager per consumer over subscriber/nacos; policy: %s; shared limiter 1000/s, burst 100 (the default).\n",
			policyText(cfg))
		fmt.Fprintf(w, "         providers: nacos.Register per service (checks the SDK's redo 1s after a reconnect, re-registers what is missing).\n")
	}
	fmt.Fprintf(w, "Recovery: from the restart until every subscription is back at the registry with the right list, at most -timeout (%v).\n\n", cfg.timeout)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	width := len(rowConverged)
	for _, l := range []string{rowDown, rowCPU, rowCPUAfter, rowCallsDown, rowCallsAfter, rowSubReqs, rowRequests, rowPeak, rowRejected, rowNotInPlace,
		rowProviders, rowProvMissing, rowRegReqs, rowRegRejected, rowHeld, rowConfirmed, rowLost, rowDuplicated, rowEmpties, rowFirstEmpty, rowGaveUp, rowEmptied} {
		width = max(width, len(l))
	}
	row := func(label string, cell func(r result) string) {
		fmt.Fprintf(tw, "%-*s\t", width, label)
		for _, r := range results {
			v := "no restart"
			if r.restarted {
				v = cell(r)
			}
			fmt.Fprintf(tw, "%s\t", v)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "%-*s\t", width, "")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t", r.mode)
	}
	fmt.Fprintln(tw)
	server := func(f func(r result) int64) func(r result) string {
		return func(r result) string {
			if !r.observed {
				return notAvailable
			}
			return fmt.Sprint(f(r))
		}
	}
	row(rowDown, func(r result) string { return seconds(r.downFor) })
	row(rowCPU, func(r result) string {
		if !r.cpuOK {
			return notAvailable
		}
		return fmt.Sprintf("%.2fs", r.cpuDown.Seconds())
	})
	row(rowCPUAfter, func(r result) string {
		if !r.cpuOK {
			return notAvailable
		}
		return fmt.Sprintf("%.2fs", r.cpuAfter.Seconds())
	})
	row(rowCallsDown, func(r result) string { return fmt.Sprint(r.attemptsDown) })
	row(rowCallsAfter, func(r result) string { return fmt.Sprint(r.attemptsAfter) })
	row(rowSubReqs, server(func(r result) int64 { return r.subReqAfter }))
	row(rowRequests, server(func(r result) int64 { return r.reqAfter }))
	row(rowPeak, server(func(r result) int64 { return r.peakAfter }))
	row(rowRejected, server(func(r result) int64 { return r.rejected }))
	row(rowConverged, func(r result) string {
		if r.converged {
			return seconds(r.convergeIn)
		}
		return notConvergedIn + seconds(r.after)
	})
	row(rowHeld, func(r result) string {
		switch {
		case !r.observed:
			return notAvailable
		case r.heldIn == 0:
			return notConvergedIn + seconds(r.after)
		}
		return seconds(r.heldIn)
	})
	row(rowConfirmed, func(r result) string {
		if r.confirmedIn == 0 {
			return notConvergedIn + seconds(r.after)
		}
		return seconds(r.confirmedIn)
	})
	row(rowNotInPlace, func(r result) string { return fmt.Sprint(r.notInPlace) })
	row(rowProviders, func(r result) string {
		switch {
		case !r.observed:
			return notAvailable
		case r.providers == 0:
			return notConvergedIn + seconds(r.after)
		}
		return seconds(r.providers)
	})
	row(rowProvMissing, func(r result) string {
		if !r.observed {
			return notAvailable
		}
		return fmt.Sprint(r.provMissing)
	})
	row(rowRegReqs, server(func(r result) int64 { return r.regReqAfter }))
	row(rowRegRejected, server(func(r result) int64 { return r.regRejected }))
	row(rowLost, func(r result) string { return fmt.Sprint(r.lost) })
	row(rowDuplicated, func(r result) string { return fmt.Sprint(r.duplicated) })
	row(rowEmpties, func(r result) string { return fmt.Sprint(r.empties) })
	row(rowFirstEmpty, func(r result) string { return fmt.Sprint(r.firstEmpty) })
	row(rowGaveUp, func(r result) string { return fmt.Sprint(r.gaveUp) })
	row(rowEmptied, func(r result) string {
		switch {
		case !r.emptiedObserved:
			return "n/a"
		case !r.emptiedOK:
			return "not within " + seconds(emptyTimeout)
		}
		return seconds(r.emptiedIn)
	})
	if err := tw.Flush(); err != nil {
		return err
	}

	notes := []string{
		"sdk: nacos-sdk-go v2.3.2 alone (one Subscribe per service, then its redo after each reconnect): the baseline.",
		"subscribe calls: client.Subscribe calls (naive) or Registry.Subscribe attempts by the Managers (rebound).",
		"provider instances: one per provider per service (" + fmt.Sprint(cfg.providers*cfg.subs) + "); missing: not listed by the registry when the recovery window ended; re-registered: the time until the registry listed every one; register requests: every InstanceRequest the registry received in the window (redo, repair and the rejected ones).",
		"missing: not subscribed at the registry (or, with -nacos, not confirmed by the consumer's code).",
		"held: every subscription at the registry, whatever the lists (this waits for every consumer's nacos-sdk-go client to reconnect, at the SDK's own pace); confirmed: and the consumer code believes it (rebound: every Manager subscription in state subscribed; the SDK alone and the naive loop believe it all along); \"back, right list\" also waits for the providers to re-register.",
		"lost: listeners whose final list differs from the registry's after one more provider registered in every service once the recovery ended.",
		"duplicated: listener calls with the same list as the previous call to that listener.",
		"empty lists: listener calls with no instance, from the outage on (the providers were up throughout); \"first lists\": the first lists of listeners started during the outage, before the providers had re-registered with the restarted registry.",
		"emptied: the price of rebound's empty-list hold. Once the rest is measured, every instance of one service is deregistered: the time until every listener that had its list holds the empty list (rebound, within subscriber.WithEmptyListHold of a reconnect: when the hold ends).",
	}
	if cfg.nacosAddr != "" {
		notes = append(notes,
			"n/a: the program cannot count a real server's requests or read its instance lists.",
			"The outage is timed from the moment a consumer's client saw the server go down to the moment it saw it back.",
			"The naive code cannot tell whether its subscriptions are in place: for it, \"back\" only means that every listener has the right list; the change after recovery is the real test.")
	}
	fmt.Fprintln(w)
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

// printVerdict says, one line per run, whether every subscription and
// registration came back and what was lost, then compares rebound with
// the SDK alone: what a reader needs before the table.
func printVerdict(w io.Writer, cfg config, results []result) {
	fmt.Fprintln(w, "Verdict (the table and what each row means follow):")
	subs := cfg.clients * cfg.subs
	for _, r := range results {
		if !r.restarted {
			fmt.Fprintf(w, "  %-8s the registry was not restarted: nothing to judge.\n", r.mode.String()+":")
			continue
		}
		var bad []string
		if r.notInPlace > 0 {
			bad = append(bad, fmt.Sprintf("%d of %d subscriptions missing", r.notInPlace, subs))
		}
		if r.observed && r.provMissing > 0 {
			bad = append(bad, fmt.Sprintf("%d of %d provider instances missing", r.provMissing, r.provTotal))
		}
		if r.lost > 0 {
			bad = append(bad, fmt.Sprintf("%d notifications lost", r.lost))
		}
		if r.gaveUp > 0 {
			bad = append(bad, fmt.Sprintf("%d subscriptions abandoned", r.gaveUp))
		}
		var v string
		switch {
		case len(bad) > 0:
			v = "at the end of recovery, " + strings.Join(bad, ", ") + "."
		case r.converged:
			v = "every subscription back with the right list in " + seconds(r.convergeIn)
			if r.observed {
				v += ", every provider instance re-registered"
			}
			v += ", nothing lost."
		default:
			v = "nothing missing, but not every list was right within " + seconds(r.after) + "."
		}
		fmt.Fprintf(w, "  %-8s %s\n", r.mode.String()+":", v)
	}
	printVersus(w, results)
	fmt.Fprintln(w)
}

// printVersus compares rebound with the SDK alone, from the same run.
func printVersus(w io.Writer, results []result) {
	var sdk, rb *result
	for i := range results {
		switch results[i].mode {
		case sdkMode:
			sdk = &results[i]
		case reboundMode:
			rb = &results[i]
		}
	}
	if sdk == nil || rb == nil || !sdk.restarted || !rb.restarted || !sdk.observed {
		return
	}
	fmt.Fprint(w, "  rebound vs the SDK alone")
	if sdk.subReqAfter > 0 {
		fmt.Fprintf(w, ": %d vs %d SubscribeServiceRequests during recovery (x%.2f)",
			rb.subReqAfter, sdk.subReqAfter, float64(rb.subReqAfter)/float64(sdk.subReqAfter))
	}
	switch {
	case rb.converged && sdk.converged:
		fmt.Fprintf(w, "; every subscription confirmed %+.1fs after the SDK alone's were held (rebound's own lag, from held to confirmed: %.1fs; the rest is the clients' reconnect timing, the same SDK code in both runs).\n",
			(rb.confirmedIn - sdk.confirmedIn).Seconds(), (rb.confirmedIn - rb.heldIn).Seconds())
	case rb.converged:
		fmt.Fprintf(w, "; the SDK alone never got %d subscriptions back (%d lost notifications), rebound got all back in %s.\n",
			sdk.notInPlace, sdk.lost, seconds(rb.convergeIn))
	default:
		fmt.Fprintln(w, ".")
	}
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// policyText describes the Manager's policy.
func policyText(cfg config) string {
	p := cfg.policy() // Initial and Max 0: 1s and 30s, the Policy's defaults
	s := fmt.Sprintf("%s jitter, 1s doubling to 30s, unlimited attempts", jitterName(p.Jitter))
	if cfg.jitter == 0 {
		s = "rebound's default (" + s + ")"
	}
	return strings.TrimSpace(s)
}
