package analyze

import (
	"fmt"
)

// diagnose states the tail's causes in plain words, with the numbers behind
// them. The first sentence names the dominant cause; further sentences add
// secondary causes (share ≥ 25 %) and cache misses.
func (rep *Report) diagnose() {
	rep.cited = cited{}
	at := &rep.Attribution
	if rep.Completed == 0 {
		at.Diagnosis = []string{fmt.Sprintf("No request succeeded (%d failed), so there is no latency to attribute; see the failures by status.", rep.Failed)}
		return
	}
	if at.TailRequests == 0 {
		return
	}
	metric := "E2E"
	if at.TailMetric == MetricTTFT {
		metric = "TTFT"
	}
	l := at.Load
	var d []string
	d = append(d, fmt.Sprintf("The p%s %s tail is %d request(s) at or above %s (%s attribution); %.0f%% of their time is %s.",
		fmtPct(at.TailPercentile), metric, at.TailRequests, fmtMs(at.TailThresholdMs), at.Source,
		100*at.Share.Array()[indexOf(at.Dominant)], componentLabel(indexOf(at.Dominant))))
	sh := at.Share.Array()
	order := []int{indexOf(at.Dominant)}
	for k := range sh {
		if k != order[0] && sh[k] >= 0.25 {
			order = append(order, k)
		}
	}
	for _, k := range order {
		if s := rep.cause(k); s != "" {
			d = append(d, s)
		}
	}
	if l.TailCachedFraction != nil && l.AllCachedFraction != nil && *l.AllCachedFraction-*l.TailCachedFraction >= 0.15 {
		d = append(d, fmt.Sprintf("Cache misses: the tail had %.0f%% of its prompt tokens served from the prefix cache against %.0f%% overall, so it prefilled %.0f uncached tokens per request against %.0f.",
			100**l.TailCachedFraction, 100**l.AllCachedFraction, l.TailUncachedTokens, l.AllUncachedTokens))
	}
	d = append(d, rep.replicaSentences()...)    // fleet.go
	d = append(d, rep.fleetSentences()...)      // instances.go
	if s := rep.crossCheckSentence(); s != "" { // crosscheck.go
		d = append(d, s)
	}
	d = append(d, rep.whenSentence()) // evidence.go
	if s := rep.simLatenessSentence(); s != "" {
		// It qualifies every sentence after it.
		d = append([]string{s}, d...)
	}
	if s := rep.crossCheckDisagreement(); s != "" { // crosscheck.go
		d = append([]string{s}, d...)
	}
	at.Diagnosis = d
}

func indexOf(name string) int {
	for k, n := range ComponentNames {
		if n == name {
			return k
		}
	}
	return cOther
}

func fmtPct(p float64) string { return fmt.Sprintf("%g", p) }

// componentLabel is component k's name in prose.
func componentLabel(k int) string {
	switch k {
	case cKVTransfer:
		return "KV transfer"
	case cDecodeQueue:
		return "decode-side queue"
	}
	return ComponentNames[k]
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// cause explains one component for the tail.
func (rep *Report) cause(k int) string {
	at := &rep.Attribution
	l := at.Load
	m := at.MeanMs.Array()
	all := at.MeanAllMs.Array()
	switch k {
	case cLateness:
		return fmt.Sprintf("Client lateness: the replayer sent tail requests %s late on average (p99 lateness %s over the run) — the client, not the server, fell behind; give the replayer more CPU or connections, or lower the speed.",
			fmtMs(l.TailLatenessMs), fmtMs(rep.Lateness.P99))
	case cKVTransfer:
		return rep.kvTransferCause() // fleet.go
	case cDecodeQueue:
		return rep.decodeQueueCause() // fleet.go
	case cQueue:
		if rep.mostlyDisaggregated() {
			return rep.prefillQueueCause() // fleet.go
		}
		if rep.tailLoadLower() {
			// The evidence says the server was less busy around the tail
			// than on average: do not call the wait load-driven.
			return fmt.Sprintf("Queueing without more load: tail requests waited %s on average before prefill against %s overall, yet only %.1f other requests (%.0f prompt tokens) were in flight when they were sent against %.1f (%.0f) overall.",
				fmtMs(m[cQueue]), fmtMs(all[cQueue]), l.TailInFlight, l.TailPromptTokensInFlight, l.AllInFlight, l.AllPromptTokensInFlight) +
				rep.serverSentence() +
				" The wait did not come from load already there when they were sent: look at what arrived while they waited (a burst, or another load such as a batch job starting with them) or at a server stall (warm-up, compilation, preemption)."
		}
		kind := "Queueing"
		if l.TailInFlight > 2*l.AllInFlight && l.TailInFlight >= 2 {
			kind = "Queueing burst"
		}
		return fmt.Sprintf("%s: tail requests waited %s on average before prefill against %s overall; %.1f other requests (%.0f prompt tokens) were in flight when they were sent against %.1f (%.0f) overall.",
			kind, fmtMs(m[cQueue]), fmtMs(all[cQueue]), l.TailInFlight, l.TailPromptTokensInFlight, l.AllInFlight, l.AllPromptTokensInFlight) + rep.serverSentence()
	case cPrefill:
		s := fmt.Sprintf("Long prefill: tail prompts averaged %.0f uncached tokens against %.0f overall, and prefill took %s against %s",
			l.TailUncachedTokens, l.AllUncachedTokens, fmtMs(m[cPrefill]), fmtMs(all[cPrefill]))
		switch note := rep.pdPrefillNote(); {
		case at.Source == SourceServer:
		case rep.mostlyDisaggregated() && note != "":
			s += note
		default:
			s += fmt.Sprintf(" (estimated as %s + %.1f µs per uncached token, fitted on %d least-loaded requests)",
				fmtMs(at.Prefill.FixedMs), at.Prefill.PerTokenUs, at.Prefill.FittedOn)
		}
		return s + "."
	case cDecode:
		slow := ratio(l.TailTPOTMs, at.Prefill.UnloadedTPOTMs)
		long := l.TailOutputTokens > 1.5*l.AllOutputTokens
		if slow < 1.2 && long {
			return fmt.Sprintf("Long outputs: tail requests generated %.0f tokens against %.0f overall and spent %s decoding against %s, at a TPOT of %s (%.1f× the least-loaded requests' %s) — the decode itself was not slow.",
				l.TailOutputTokens, l.AllOutputTokens, fmtMs(m[cDecode]), fmtMs(all[cDecode]), fmtMs(l.TailTPOTMs), slow, fmtMs(at.Prefill.UnloadedTPOTMs))
		}
		s := fmt.Sprintf("Decode slowdown: tail requests spent %s decoding against %s overall; their TPOT averaged %s against %s on the least-loaded requests (%.1f×)",
			fmtMs(m[cDecode]), fmtMs(all[cDecode]), fmtMs(l.TailTPOTMs), fmtMs(at.Prefill.UnloadedTPOTMs), slow)
		if long {
			s += fmt.Sprintf(", and they generated %.0f tokens against %.0f overall (long outputs)", l.TailOutputTokens, l.AllOutputTokens)
		}
		s += fmt.Sprintf("; %.1f requests were in flight when they were sent against %.1f overall", l.TailInFlight, l.AllInFlight)
		if rep.tailLoadLower() {
			s += " (less load, so the slowdown did not come from load at send time)"
		}
		return s + "." + rep.serverSentence()
	case cOther:
		if b := rep.pdTailBasis(); b.n > 0 && 2*(b.reported+b.series) < b.n {
			return fmt.Sprintf("Unexplained: %s per tail request against %s overall lies between the prefill side's modelled end and the first token, which neither a KV transfer histogram nor a full decode replica accounts for. The decode replica's per-request timings (vLLM's --enable-per-request-metrics, or its spans) or the fleet's /metrics would place it.",
				fmtMs(m[cOther]), fmtMs(all[cOther]))
		}
		return fmt.Sprintf("Other (network, tokenization, detokenization — time the server's own timings do not cover): %s per tail request against %s overall.",
			fmtMs(m[cOther]), fmtMs(all[cOther]))
	}
	return ""
}

// lowerLoadShare is how far below the run's mean the tail's in-flight count
// at send must be for the tail to count as sent into less load.
const lowerLoadShare = 0.8

// tailLoadLower says whether the report's own load evidence puts the tail
// below the average load: fewer requests in flight when the tail was sent
// (under lowerLoadShare of the mean), and — when the server's metrics were
// scraped — neither a longer waiting queue nor a fuller KV cache around the
// tail. A cause must then not be worded as load-driven.
func (rep *Report) tailLoadLower() bool {
	l := rep.Attribution.Load
	if !(l.AllInFlight > 0) || l.TailInFlight >= lowerLoadShare*l.AllInFlight {
		return false
	}
	if sl := rep.Attribution.ServerLoad; sl != nil {
		if sl.TailWaiting != nil && sl.AllWaiting != nil && *sl.TailWaiting > *sl.AllWaiting {
			return false
		}
		if sl.TailKVCacheUsage != nil && sl.AllKVCacheUsage != nil && *sl.TailKVCacheUsage > *sl.AllKVCacheUsage {
			return false
		}
	}
	return true
}
