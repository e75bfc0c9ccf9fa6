//go:build unix

package formats_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// BenchmarkImportLongLine imports, for every text importer, its sample
// with one line (or JSON document) of 1 GB in it: the time is the read
// past the line (MB/s of the line), B/op what the import allocated; the
// line must come out as one bad row, too long.
//
//	go test ./traces/formats -run '^$' -bench ImportLongLine -benchtime 1x
func BenchmarkImportLongLine(b *testing.B) {
	const size = 1_000_000_000
	for _, c := range longInputs() {
		name := c.format
		if c.sample != "" {
			name += "/" + strings.TrimSuffix(filepath.Base(c.sample), filepath.Ext(c.sample))
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				_, st, err := importLong(b, c.format, c.in(size), traces.DefaultOpenOptions())
				if err != nil || st.Bad[traces.ProblemTooLong].Rows != 1 {
					b.Fatalf("%d too long, %v; want the line too long", st.Bad[traces.ProblemTooLong].Rows, err)
				}
			}
			// CPU time (user + system, the generator's included) does
			// not grow with the machine's load as wall time does.
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
