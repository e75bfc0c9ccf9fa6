package synth

import "testing"

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
