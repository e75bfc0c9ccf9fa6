package analyze

import (
	"fmt"
	"strconv"
	"time"
)

// Clock agreement of pooled replay shards. Each shard that started on a
// common StartAt records in its results metadata its clock offset against
// the target (bracketed from HTTP Date headers, with its error bound) and
// its start error (its first dispatch minus the instant it was due). Pooled
// shards are one run only if their clocks agree: ShardClocks reports the
// spread between them and Close warns when it passes ShardClockWarn.

// Results metadata keys that replay writes (replay.MetaClockOffset and its
// neighbours; analyze does not import replay).
const (
	metaClockOffset      = "replay.clock_offset_ns"
	metaClockOffsetError = "replay.clock_offset_error_ns"
	metaStartError       = "replay.start_error_ns"
)

// ShardClockWarn is the spread between pooled shards above which analyze
// warns.
const ShardClockWarn = 5 * time.Millisecond

// ShardClock is one results file's clock record.
type ShardClock struct {
	File string `json:"file"`
	// OffsetMs is the target's clock minus the shard's, within
	// ±OffsetErrorMs (HasOffset false: not measured).
	OffsetMs      float64 `json:"offset_ms"`
	OffsetErrorMs float64 `json:"offset_error_ms"`
	HasOffset     bool    `json:"has_offset"`
	// StartErrorMs is the shard's first dispatch minus when it was due
	// (HasStartError false: not recorded).
	StartErrorMs  float64 `json:"start_error_ms"`
	HasStartError bool    `json:"has_start_error"`
}

// ShardClocks is the clock agreement of the pooled files that recorded one.
type ShardClocks struct {
	Shards []ShardClock `json:"shards"`
	// OffsetSpreadMs is the largest minus the smallest measured offset;
	// OffsetErrorMs the largest error bound among them (the true spread is
	// within OffsetSpreadMs ± 2 × OffsetErrorMs).
	OffsetSpreadMs float64 `json:"offset_spread_ms"`
	OffsetErrorMs  float64 `json:"offset_error_ms"`
	// StartErrorSpreadMs is the largest minus the smallest start error.
	StartErrorSpreadMs float64 `json:"start_error_spread_ms"`
}

// shardClocks reads the clock records of sources; nil unless two or more
// files recorded one.
func shardClocks(sources []Source) *ShardClocks {
	var out ShardClocks
	ms := func(ns string) (float64, bool) {
		v, err := strconv.ParseInt(ns, 10, 64)
		return float64(v) / 1e6, err == nil
	}
	var offs, starts []float64
	for _, s := range sources {
		c := ShardClock{File: s.File}
		var okErr bool
		c.OffsetMs, c.HasOffset = ms(s.Meta.Get(metaClockOffset))
		c.OffsetErrorMs, okErr = ms(s.Meta.Get(metaClockOffsetError))
		c.HasOffset = c.HasOffset && okErr
		c.StartErrorMs, c.HasStartError = ms(s.Meta.Get(metaStartError))
		if !c.HasOffset && !c.HasStartError {
			continue
		}
		if c.HasOffset {
			offs = append(offs, c.OffsetMs)
			out.OffsetErrorMs = max(out.OffsetErrorMs, c.OffsetErrorMs)
		}
		if c.HasStartError {
			starts = append(starts, c.StartErrorMs)
		}
		out.Shards = append(out.Shards, c)
	}
	if len(out.Shards) < 2 {
		return nil
	}
	out.OffsetSpreadMs, out.StartErrorSpreadMs = spread(offs), spread(starts)
	return &out
}

func spread(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	lo, hi := v[0], v[0]
	for _, x := range v[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return hi - lo
}

// warnings says where the shards disagree by more than ShardClockWarn.
func (c *ShardClocks) warnings() []string {
	lim := float64(ShardClockWarn) / 1e6
	var w []string
	if c.OffsetSpreadMs > lim {
		w = append(w, fmt.Sprintf("pooled shards' clocks disagree: their offsets against the target spread over %.1f ms (each ±%.1f ms at most), above %v: their timings are not on one clock (check NTP on the nodes)", c.OffsetSpreadMs, c.OffsetErrorMs, ShardClockWarn))
	}
	if c.StartErrorSpreadMs > lim {
		w = append(w, fmt.Sprintf("pooled shards started apart: their start errors against their common start spread over %.1f ms, above %v", c.StartErrorSpreadMs, ShardClockWarn))
	}
	return w
}

// line is the text report's one line on shard clocks.
func (c *ShardClocks) line() string {
	return fmt.Sprintf("Shard clocks (%d files): offsets against the target spread %.2f ms (each ±%.2f ms at most); start errors spread %.2f ms",
		len(c.Shards), c.OffsetSpreadMs, c.OffsetErrorMs, c.StartErrorSpreadMs)
}
