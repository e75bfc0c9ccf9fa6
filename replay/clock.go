package replay

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// Clock agreement of a replay shard. Shards on many machines start on one
// Options.StartAt read from their own clocks; what they measure is only
// comparable when those clocks agree with each other (and with the
// target's). A replay with StartAt records two numbers in its results
// metadata:
//
//   - its clock offset against the target (the target's clock minus ours),
//     bracketed from the HTTP Date header of a few GET requests sent while
//     it waits for StartAt (MetaClockOffset ± MetaClockOffsetError);
//   - its start error: when its first request was actually sent minus
//     when it was due (StartAt plus that request's offset)
//     (MetaStartError).
//
// The Date header has 1 s resolution, so one response bounds the offset to
// a 1 s window (plus the round trip). The probes bisect it: each is sent so
// that, by the current estimate, the target's second changes while it is
// in flight; which second the target stamps halves the window, down to
// about half a round trip. The bracket always holds the offset of the
// moment it was taken (nothing is assumed about symmetric delays); it
// narrows with the probes that fit before StartAt (Options.ClockProbes,
// one per second at most).
const (
	MetaClockOffset      = "replay.clock_offset_ns"
	MetaClockOffsetError = "replay.clock_offset_error_ns"
	MetaClockProbes      = "replay.clock_probes"
	MetaClockMethod      = "replay.clock_method"
	MetaStartError       = "replay.start_error_ns"
	// ClockMethodHTTPDate is MetaClockMethod's value: bisection of HTTP
	// Date headers.
	ClockMethodHTTPDate = "http-date-bisection"
)

// DefaultClockProbes is the default Options.ClockProbes.
const DefaultClockProbes = 12

// clockGuard is how long before StartAt probing stops.
const clockGuard = 50 * time.Millisecond

// ClockOffset is the target's clock minus ours: within Offset ± Error.
type ClockOffset struct {
	Offset, Error time.Duration
	// Probes is the number of responses with a Date header that bound it.
	Probes int
}

// probeClock measures the clock offset while the run waits for StartAt
// (nil when not measured).
func (r *runner) probeClock(ctx context.Context) *ClockOffset {
	n := r.o.ClockProbes
	if n <= 0 || r.base == "" {
		return nil
	}
	c := *r.client
	c.Timeout = 2 * time.Second
	off, ok := probeClock(ctx, &c, r.base, n, r.o.StartAt.Add(-clockGuard))
	if !ok {
		return nil
	}
	return &off
}

// probeClock brackets the clock offset of the server at base with up to n
// GET requests (to /health; any response with a Date header serves),
// sending none after deadline. ok is false when no response had one.
func probeClock(ctx context.Context, client *http.Client, base string, n int, deadline time.Time) (ClockOffset, bool) {
	url := strings.TrimSuffix(base, "/") + "/health"
	var lo, hi, rtt time.Duration
	got := 0
	for i := 0; i < n; i++ {
		if got > 0 {
			// Aim the probe's middle at the target's next second change
			// as the estimate has it.
			mid := lo + (hi-lo)/2
			srv := time.Now().Add(mid + rtt/2 + 5*time.Millisecond)
			change := srv.Truncate(time.Second).Add(time.Second)
			sendAt := change.Add(-mid - rtt/2)
			if sendAt.After(deadline) {
				break
			}
			select {
			case <-time.After(time.Until(sendAt)):
			case <-ctx.Done():
				return ClockOffset{}, false
			}
		} else if time.Now().After(deadline) {
			break
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return ClockOffset{}, false
		}
		sent := time.Now()
		resp, err := client.Do(req)
		recv := time.Now()
		if err != nil {
			continue
		}
		resp.Body.Close()
		date, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			continue
		}
		// The target stamped a time in [date, date+1s) at a moment
		// between sent and recv of ours.
		l, h := date.Sub(recv), date.Add(time.Second).Sub(sent)
		if got == 0 {
			lo, hi = l, h
		} else {
			lo, hi = max(lo, l), min(hi, h)
		}
		rtt = recv.Sub(sent)
		got++
		if lo > hi { // the target's clock jumped between probes: start over
			lo, hi, got = l, h, 1
		}
	}
	if got == 0 {
		return ClockOffset{}, false
	}
	return ClockOffset{Offset: lo + (hi-lo)/2, Error: (hi - lo) / 2, Probes: got}, true
}

// clockMeta records the clock offset (when measured) and the start error
// (when StartAt was set and a request was sent).
func clockMeta(m *traces.Meta, c *ClockOffset, s *Summary, startAt time.Time) {
	if c != nil {
		m.Set(MetaClockOffset, strconv.FormatInt(int64(c.Offset), 10))
		m.Set(MetaClockOffsetError, strconv.FormatInt(int64(c.Error), 10))
		m.Set(MetaClockProbes, strconv.Itoa(c.Probes))
		m.Set(MetaClockMethod, ClockMethodHTTPDate)
	}
	if !startAt.IsZero() && s.firstSent {
		m.Set(MetaStartError, strconv.FormatInt(int64(s.StartError), 10))
	}
}
