package formats

import (
	"io"

	"github.com/tokentrace/tokentrace/traces"
)

// NewSplitwiseReader reads Vidur's processed request traces
// (microsoft/vidur data/processed_traces, e.g. splitwise_code.csv): CSV with
// arrived_at (seconds since the first request, a decimal that may carry
// float artefacts such as 5.8926549999999995), num_prefill_tokens and
// num_decode_tokens, found by name; other columns (num_total_tokens,
// pd_ratio) are ignored.
//
// ArrivalNs = arrived_at rounded to the nearest nanosecond (kept as it is,
// not re-based), InputTokens = num_prefill_tokens, OutputTokens =
// num_decode_tokens. The length-only files of the same family (arXiv
// summarization, ShareGPT stats) have no arrived_at: every row then arrives
// at 0 and Meta.Extra["arrivals"] is "none", which is still useful for
// fitting length distributions.
func NewSplitwiseReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	c, err := newImportCSV(r, name, o)
	if err != nil {
		return nil, err
	}
	d := &splitwiseDecoder{c: c, at: c.col("arrived_at")}
	if d.lengths, err = c.requireLengths("num_prefill_tokens", "num_decode_tokens"); err != nil {
		return nil, err
	}
	m := traces.NewMeta(importSource("splitwise", name))
	if d.at < 0 {
		m.Set("arrivals", "none")
	}
	return newImportReader(r, d, m, o), nil
}

type splitwiseDecoder struct {
	c       *importCSV
	at      int
	lengths importLengths
}

func (d *splitwiseDecoder) next(rec *traces.Record) error {
	row, err := d.c.row()
	if err != nil {
		return err
	}
	name, line := d.c.name, d.c.line
	if d.at >= 0 {
		if rec.ArrivalNs, err = parseScaled(row[d.at], 9); err != nil {
			return importRowError(name, line, "arrived_at: %v", err)
		}
	}
	rec.InputTokens, rec.OutputTokens, err = d.lengths.parse(row)
	return err
}
