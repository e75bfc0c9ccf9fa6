package synth

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// BenchmarkBlockTableMooncake runs the block ids of the shared Mooncake
// conversation trace, repeated with each repeat's ids moved past the last
// one's (as a week of such traffic would look), through a class's block
// table: the reuse-distance lookups of a fit with prefix blocks, alone
// (ns/block; mixed = 1 when the table ended placing by its mixing hash).
func BenchmarkBlockTableMooncake(b *testing.B) {
	recs, _ := loadPublic(b, publicTraces[2])
	var maxID int64
	var blocks int64
	for i := range recs {
		for _, id := range recs[i].PrefixBlocks {
			maxID = max(maxID, id)
		}
		blocks += int64(len(recs[i].PrefixBlocks))
	}
	const repeats = 40 // ~480 k rows, several table generations
	b.ResetTimer()
	for b.Loop() {
		bt := blockTable{gen: defaultFitLimits.blocks}
		var row, found int64
		for k := range int64(repeats) {
			off := k * (maxID + 1)
			for i := range recs {
				for _, id := range recs[i].PrefixBlocks {
					if _, ok := bt.swap(id+off, row); ok {
						found++
					}
				}
				row++
			}
		}
		b.ReportMetric(float64(found), "found")
		b.ReportMetric(float64(bt.dropped), "dropped")
		mixed := 0.0
		if bt.mix {
			mixed = 1
		}
		b.ReportMetric(mixed, "mixed")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*blocks*repeats), "ns/block")
}

// BenchmarkFitMooncakeLike fits the shared Mooncake conversation trace
// repeated 40 times (481 k rows) from Parquet, as docs/figures.md's 10 M-row
// file is made: "same-ids" repeats the block ids (182,790 distinct blocks,
// the table never fills a generation), "new-ids" moves each repeat's ids
// past the last one's (as new traffic brings new blocks, 7.3 M distinct:
// many generations). records/s, records/cpu-s and peak-MB as BenchmarkFit.
func BenchmarkFitMooncakeLike(b *testing.B) {
	recs, meta := loadPublic(b, publicTraces[2])
	var maxID, span int64
	for i := range recs {
		for _, id := range recs[i].PrefixBlocks {
			maxID = max(maxID, id)
		}
		span = max(span, recs[i].ArrivalNs)
	}
	span += int64(time.Second)
	const repeats = 40
	for _, newIDs := range []bool{false, true} {
		name := "same-ids"
		if newIDs {
			name = "new-ids"
		}
		path := filepath.Join(b.TempDir(), name+".parquet")
		w, err := traces.Create(path, meta)
		if err != nil {
			b.Fatal(err)
		}
		for k := range int64(repeats) {
			batch := make([]traces.Record, len(recs))
			for i, r := range recs {
				r.Seq += k * int64(len(recs))
				r.ArrivalNs += k * span
				if newIDs {
					r.PrefixBlocks = slices.Clone(r.PrefixBlocks)
					for j := range r.PrefixBlocks {
						r.PrefixBlocks[j] += k * (maxID + 1)
					}
				}
				batch[i] = r
			}
			if _, err := w.Write(batch); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			benchFit(b, int64(repeats*len(recs)), func() error { return fitPath(path) })
		})
	}
}
