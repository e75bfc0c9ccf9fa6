package traces_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tokentrace/tokentrace/traces"
)

// Write a trace as Parquet and read it back; the codec follows the
// extension on write and the content on read.
func ExampleWriteAll() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "trace.parquet")

	var recs []traces.Record
	for i, at := range []int64{2e9, 0, 1e9} { // out of order: Parquet sorts by arrival
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs, r.InputTokens, r.OutputTokens = int64(i), at, 100, 10
		recs = append(recs, r)
	}
	if err := traces.WriteAll(name, traces.NewMeta("example"), recs); err != nil {
		fmt.Println(err)
		return
	}
	got, meta, err := traces.ReadAll(name)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(meta.Source, meta.SchemaVersion)
	for _, r := range got {
		fmt.Println(r.Seq, r.ArrivalNs, r.SentNs == traces.NotReported)
	}
	// Output:
	// example 1.0
	// 1 0 true
	// 2 1000000000 true
	// 0 2000000000 true
}

func ExampleQuantile() {
	x := []float64{1, 2, 3, 4, 10} // sorted ascending
	fmt.Println(traces.Quantile(x, 0.5), traces.Quantile(x, 0.99))
	// Output: 3 9.76
}
