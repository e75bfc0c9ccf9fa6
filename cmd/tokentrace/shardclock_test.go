package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReplayShardClocksReachAnalyze: a replay with --start-at records its
// clock offset against the target (the built-in simulator, on this
// machine's clock) and its start error, and analyze of pooled results
// reports them: the metadata keys replay writes are the ones analyze reads.
func TestReplayShardClocksReachAnalyze(t *testing.T) {
	trace := writeReplayTrace(t, 4)
	dir := t.TempDir()
	start := time.Now().Add(2500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	res := filepath.Join(dir, "results-0.parquet")
	var so, se bytes.Buffer
	if code := Main(context.Background(), []string{"tokentrace", "replay", "--quiet", "--max-lateness", "10s", "--start-at", start, "--out", res, trace}, nil, &so, &se); code != 0 {
		t.Fatalf("replay: exit %d\n%s", code, se.String())
	}
	b, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	res1 := filepath.Join(dir, "results-1.parquet")
	if err := os.WriteFile(res1, b, 0o644); err != nil {
		t.Fatal(err)
	}
	so.Reset()
	if code := Main(context.Background(), []string{"tokentrace", "analyze", "--json", res, res1}, nil, &so, &se); code != 0 {
		t.Fatalf("analyze: exit %d\n%s", code, se.String())
	}
	var rep struct {
		ShardClocks *struct {
			Shards []struct {
				OffsetMs      float64 `json:"offset_ms"`
				OffsetErrorMs float64 `json:"offset_error_ms"`
				HasOffset     bool    `json:"has_offset"`
				HasStartError bool    `json:"has_start_error"`
			} `json:"shards"`
			OffsetSpreadMs float64 `json:"offset_spread_ms"`
		} `json:"shard_clocks"`
	}
	if err := json.Unmarshal(so.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.ShardClocks
	if c == nil || len(c.Shards) != 2 || !c.Shards[0].HasOffset || !c.Shards[0].HasStartError || c.OffsetSpreadMs != 0 {
		t.Fatalf("shard clocks %+v", c)
	}
	// The simulator runs on our clock: the bracket holds 0.
	if s := c.Shards[0]; s.OffsetMs-s.OffsetErrorMs > 0 || s.OffsetMs+s.OffsetErrorMs < 0 {
		t.Errorf("offset %.3f ± %.3f ms against a target on our own clock", s.OffsetMs, s.OffsetErrorMs)
	}
}
