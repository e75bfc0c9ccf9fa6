package analyze

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// FuzzAnalyzeRecords builds results rows from arbitrary numbers (negative,
// out of order, missing, huge) and checks that analysis and every renderer
// succeed without panicking and the JSON stays valid (no NaN or Inf).
func FuzzAnalyzeRecords(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x10\x00\x00\x01\x00\x05ok"), uint8(3))
	f.Add(bytes.Repeat([]byte{0xff, 0x01, 0x7f}, 40), uint8(9))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		rd := bytes.NewReader(data)
		i64 := func() int64 {
			var v int32
			if binary.Read(rd, binary.BigEndian, &v) != nil {
				return -1
			}
			return int64(v) * 1000
		}
		var recs []traces.Record
		for k := range int(n%16) + 1 {
			r := traces.NewRecord()
			r.Seq = int64(k)
			r.ScheduledNs, r.SentNs, r.FirstTokenNs, r.LastTokenNs = i64(), i64(), i64(), i64()
			r.InputTokens, r.ServerCachedTokens = int32(i64()/1000), int32(i64()/1000)
			r.ServerOutputTokens = int32(i64() / 1000)
			r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs = i64(), i64(), i64()
			for c := range int(i64() & 7) {
				r.ChunkNs = append(r.ChunkNs, i64())
				if c%2 == 0 {
					r.ChunkTokens = append(r.ChunkTokens, int32(i64()/1000))
				}
			}
			if len(r.ChunkTokens) != len(r.ChunkNs) && i64()&1 == 0 {
				r.ChunkTokens = r.ChunkTokens[:0]
			}
			st, _ := rd.ReadByte()
			r.Status = []string{traces.StatusOK, traces.StatusOK, traces.StatusHTTPError, "", "weird"}[int(st)%5]
			r.Class = string(rune('a' + st%3))
			// a fleet: replicas, some disaggregated, with their timings
			if st%7 != 0 {
				r.Replica = []string{"r0", "r1", "r2"}[st%3]
			}
			if st%5 < 2 {
				r.PrefillReplica = []string{"p0", "p1"}[st%2]
				r.ServerKVTransferNs, r.ServerDecodeQueueNs = i64(), i64()
			}
			recs = append(recs, r)
		}
		o := DefaultOptions()
		o.By = []string{ByClass, ByReplica}[n%2]
		o.SLO = traces.SLO{TTFT: 1e6, TPOT: 1e5}
		o.Window = 1e6
		rep, err := Analyze(context.Background(), recs, o)
		if err != nil {
			return
		}
		if err := rep.WriteJSON(io.Discard); err != nil {
			t.Fatalf("WriteJSON: %v", err)
		}
		vo := DefaultVLLMOptions()
		vo.PercentileMetrics = VLLMMetrics
		if err := rep.WriteVLLMJSON(io.Discard, vo); err != nil {
			t.Fatalf("WriteVLLMJSON: %v", err)
		}
		// (WriteHTML is left out: gonum/plot makes each run too slow for
		// fuzzing; TestHTMLDegenerateData covers odd data.)
		for _, fn := range []func(io.Writer) error{rep.WriteText,
			func(w io.Writer) error { return rep.WriteVLLM(w, DefaultVLLMOptions()) },
			func(w io.Writer) error { return rep.WriteRequests(w, RequestsCSV) },
			func(w io.Writer) error {
				return mustCompare(t, rep, rep, fastCompare(20, DefaultMaxBootstrapSample)).WriteJSON(w)
			}} {
			if err := fn(io.Discard); err != nil {
				t.Fatalf("render: %v", err)
			}
		}
	})
}
