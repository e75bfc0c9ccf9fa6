package analyze

// What a report could not show, and on which clock its times run: a
// section left out without a word reads as "nothing to report", and a
// time counted from a replay's --window start reads as a time in the trace.

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// metricsMissingNote is the note of a report without a server metrics
// series: what that leaves out and how to record one.
func (rep *Report) metricsMissingNote() string {
	var files []string
	for _, s := range rep.Sources {
		if s.File != "-" && s.File != "" {
			files = append(files, traces.SamplesPathFor(s.File))
		}
	}
	where := "Server metrics: none"
	switch {
	case len(files) == 1:
		where += fmt.Sprintf(" (no %s beside the results)", files[0])
	case len(files) > 1:
		where += fmt.Sprintf(" (no %s, nor beside the %d other results files)", files[0], len(files)-1)
	}
	return where + ", so the diagnosis has no waiting-queue or KV-cache lines and the attribution is not cross-checked against the server's own queue/prefill/decode histograms. " +
		traces.Textf("Record them by replaying with %s http://SERVER/metrics (the built-in simulator is scraped without it); postmortem reads a production window's from Prometheus.",
			traces.OptionRef("replay.TargetOptions.MetricsURL")).Say(rep.opts.Terms)
}

// ReplayClock is how a replay's run time maps to the trace's time: the run
// started at the trace's WindowFromS (replay --window) and ran Speed times
// as fast, so run time t is trace time WindowFromS + t·Speed.
type ReplayClock struct {
	WindowFromS float64 `json:"window_from_s"`
	WindowTo    string  `json:"window_to,omitempty"`
	Speed       float64 `json:"speed"`
}

// TraceS is the trace time of run time s.
func (c *ReplayClock) TraceS(s float64) float64 { return c.WindowFromS + s*c.Speed }

// replayClock reads the replay options the sources recorded
// (replay.options: window_from, window_to, speed); nil when the run's
// clock is the trace's (no window start, speed 1), when a source does not
// say, or when the sources disagree (different runs pooled).
func replayClock(sources []Source) *ReplayClock {
	var clock *ReplayClock
	for i, s := range sources {
		raw := s.Meta.Extra["replay.options"]
		if raw == "" {
			return nil
		}
		var o struct {
			Speed      float64 `json:"speed"`
			WindowFrom string  `json:"window_from"`
			WindowTo   string  `json:"window_to"`
		}
		if json.Unmarshal([]byte(raw), &o) != nil {
			return nil
		}
		c := &ReplayClock{Speed: o.Speed, WindowTo: o.WindowTo}
		if c.Speed <= 0 {
			c.Speed = 1
		}
		if o.WindowFrom != "" {
			d, err := time.ParseDuration(o.WindowFrom)
			if err != nil {
				return nil
			}
			c.WindowFromS = d.Seconds()
		}
		if i > 0 && *c != *clock {
			return nil
		}
		clock = c
	}
	if clock == nil || (clock.WindowFromS == 0 && clock.Speed == 1) {
		return nil
	}
	return clock
}

// whenSentence is the diagnosis line saying when the tail was sent, on the
// run's clock, and on the trace's when they differ.
func (rep *Report) whenSentence() string {
	wh := rep.Attribution.When
	c := rep.ReplayClock
	var b strings.Builder
	if wh.LastS-wh.FirstS < 0.05 {
		fmt.Fprintf(&b, "The tail requests were sent at %.1f s", wh.FirstS)
	} else {
		fmt.Fprintf(&b, "The tail requests were sent between %.1f s and %.1f s", wh.FirstS, wh.LastS)
	}
	if c != nil {
		b.WriteString(" of the run")
		var how []string
		if c.WindowFromS > 0 {
			how = append(how, traces.Textf("started at the trace's %s (%s)", fmtS(c.WindowFromS), traces.OptionRef("replay.Options.WindowFrom")).Say(rep.opts.Terms))
		}
		if c.Speed != 1 {
			how = append(how, fmt.Sprintf("ran at speed %g", c.Speed))
		}
		fmt.Fprintf(&b, ", which %s", strings.Join(how, " and "))
		if wh.LastS-wh.FirstS < 0.05 {
			fmt.Fprintf(&b, ": %.1f s into the trace", c.TraceS(wh.FirstS))
		} else {
			fmt.Fprintf(&b, ": %.1f–%.1f s into the trace", c.TraceS(wh.FirstS), c.TraceS(wh.LastS))
		}
	}
	if wh.LastS-wh.FirstS >= 0.05 {
		fmt.Fprintf(&b, "; %.0f%% of them in %.1f–%.1f s", 100*wh.BusiestShare, wh.BusiestStartS, wh.BusiestEndS)
		if c != nil {
			b.WriteString(" of the run")
		}
	}
	b.WriteString(".")
	return b.String()
}

// fmtS writes seconds with one decimal ("58.3 s").
func fmtS(s float64) string { return fmt.Sprintf("%.1f s", s) }
