package traces_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// FuzzRoundTrip writes generated records (and a fuzzed label in every string
// column of the first row) through every codec and reads them back.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(3), true, "model-a")
	f.Add(uint64(2), uint8(0), false, "")
	f.Add(uint64(3), uint8(20), true, "a,\"b\"\n\\c\x00\u2028")
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, outcome bool, label string) {
		recs := randRecords(seed, int(n%64), outcome)
		// JSON carries only valid UTF-8 and encoding/csv drops a CR before
		// LF; both are documented limits of the text codecs.
		label = strings.ReplaceAll(strings.ToValidUTF8(label, "\uFFFD"), "\r", "")
		if len(recs) > 0 {
			r := &recs[0]
			r.Category, r.Model, r.API, r.Class = label, label, label, label
			r.Run, r.Status, r.Error, r.RequestID = label, label, label, label
		}
		for _, format := range traces.Formats {
			data := encodeAll(t, format, traces.NewMeta(label), traces.DefaultCreateOptions(), recs)
			r, err := traces.NewReader(bytes.NewReader(data), "fuzz", traces.DefaultOpenOptions())
			if err != nil {
				t.Fatalf("%s: open: %v", format, err)
			}
			got, err := traces.ReadFrom(r)
			if err != nil {
				t.Fatalf("%s: read: %v", format, err)
			}
			r.Close()
			if r.Meta().Source != label {
				t.Errorf("%s: meta source %q, want %q", format, r.Meta().Source, label)
			}
			want := recs
			if format == traces.FormatParquet {
				want = sortedByArrival(recs)
			}
			diffRecords(t, string(format), got, want)
			// Every row is valid; the text codecs keep the generated
			// order and count each step back in arrival.
			if st := r.Stats(); st.Skipped != 0 || st.OutOfOrder() != descents(want) {
				t.Errorf("%s: skipped %d, %d out of order; want 0 and %d", format, st.Skipped, st.OutOfOrder(), descents(want))
			}
		}
	})
}

// FuzzOpen feeds arbitrary bytes to every decoder (the sniffer routes them by
// their first bytes): no panic, no hang, errors are RowErrors or plain errors.
func FuzzOpen(f *testing.F) {
	recs := randRecords(11, 5, true)
	for _, format := range traces.Formats {
		data := encodeAll(f, format, traces.NewMeta("seed"), traces.DefaultCreateOptions(), recs)
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte(`{"seq":1,"arrival_ns":"x"}`))
	f.Add([]byte("seq,arrival_ns\n1,2,3\n\"4"))
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, strict := range []bool{false, true} {
			r, err := traces.NewReader(bytes.NewReader(data), "fuzz", with(traces.DefaultOpenOptions(), func(o *traces.OpenOptions) { o.Strict = strict }))
			if err != nil {
				continue
			}
			buf := make([]traces.Record, 7)
			for range 1 << 20 {
				n, err := r.Read(buf)
				if n < 0 || n > len(buf) {
					t.Fatalf("Read returned n=%d", n)
				}
				if err == io.EOF || err != nil {
					break
				}
			}
			r.Meta()
			r.Stats()
			r.Close()
		}
	})
}
