package synth

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/commalist"
	"github.com/tokentrace/tokentrace/traces"
)

// Matrix defaults, shared by the CLI flags and MatrixOptions.
const (
	// DefaultMatrixRows is the classic benchmark matrix: short and long
	// prompts and outputs at 1 req/s, long/long at saturation, and a long
	// prompt behind a 2048-token warm shared prefix.
	DefaultMatrixRows    = "256/128@1rps,2048/128@1rps,256/1024@1rps,2048/1024@sat,4096/256+2048w@1rps"
	DefaultRowDuration   = time.Minute
	DefaultSatRequests   = 256
	DefaultRowGap        = 10 * time.Second
	DefaultMatrixSeed    = 1
	MatrixArrivalPoisson = "poisson"
	MatrixArrivalUniform = "uniform"
)

// MatrixOptions tunes Matrix. Start from DefaultMatrixOptions: a field's
// zero is a value of its own, never its default.
type MatrixOptions struct {
	// Rows is the comma-separated list of rows (see ParseRows for the
	// syntax). Defaults to DefaultMatrixRows.
	Rows string
	// RowDuration is how long a rate row lasts. Defaults to
	// DefaultRowDuration (1m).
	RowDuration time.Duration
	// SatRequests is the number of requests of a saturation row, all sent
	// at the row's start. Defaults to DefaultSatRequests (256).
	SatRequests int
	// RowGap is the idle time between rows so one row's tail drains before
	// the next starts. Defaults to DefaultRowGap (10s).
	RowGap time.Duration
	// Arrival is MatrixArrivalPoisson (exponential gaps, as `vllm bench
	// serve --request-rate`) or MatrixArrivalUniform (evenly spaced).
	// Defaults to MatrixArrivalPoisson.
	Arrival string
	// Seed seeds Poisson arrivals. Defaults to DefaultMatrixSeed (1).
	Seed uint64
	// Model is written to every row's Model column. Defaults to "".
	Model string
}

// Row is one parsed matrix row.
type Row struct {
	// Spec is the row as written; it becomes the rows' Class.
	Spec string
	// InputTokens and OutputTokens are the fixed lengths.
	InputTokens, OutputTokens int32
	// RatePerS is the arrival rate (0 for a saturation row).
	RatePerS float64
	// Saturation sends all the row's requests at its start.
	Saturation bool
	// PrefixTokens is the shared prefix length (0 = none).
	PrefixTokens int32
	// Warm says the prefix is shared by every request of the row (so it
	// is cached after the first); cold rows get no shared prefix.
	Warm bool
}

// ParseRows parses a matrix row list:
//
//	ROW  := IN "/" OUT "@" LOAD [ "+" PREFIX ("w" | "c") ]
//	LOAD := RATE "rps" | "sat"
//
// e.g. "256/128@1rps", "2048/1024@sat", "4096/256+2048w@1rps" (the prefix
// may also follow the load: "4096/256@1rps+2048w"). IN includes the
// prefix. "w" (warm) shares the prefix across the row's requests under the
// category "matrix-<row>-prefix"; "c" (cold) means the same lengths with
// no shared prefix.
func ParseRows(s string) ([]Row, error) {
	rows, err := commalist.Parse(s, func(spec string) (Row, error) {
		r, err := parseRow(spec)
		if err != nil {
			return Row{}, traces.OptionErrorf("synth", "Options.Rows", "%q: %w (want IN/OUT@RATErps|sat[+PREFIXw|c], e.g. 4096/256+2048w@1rps)", spec, err)
		}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, traces.OptionErrorf("synth", "Options.Rows", "no rows")
	}
	return rows, nil
}

func parseRow(spec string) (Row, error) {
	r := Row{Spec: spec}
	body, load, ok := strings.Cut(spec, "@")
	if !ok {
		return r, fmt.Errorf("no @LOAD")
	}
	prefix := ""
	if b, p, ok := strings.Cut(body, "+"); ok {
		body, prefix = b, p
	}
	if l, p, ok := strings.Cut(load, "+"); ok {
		if prefix != "" {
			return r, fmt.Errorf("two prefixes")
		}
		load, prefix = l, p
	}
	in, out, ok := strings.Cut(body, "/")
	if !ok {
		return r, fmt.Errorf("no IN/OUT")
	}
	ni, err1 := strconv.ParseInt(in, 10, 32)
	no, err2 := strconv.ParseInt(out, 10, 32)
	if err1 != nil || err2 != nil || ni < 1 || no < 1 {
		return r, fmt.Errorf("IN and OUT must be positive integers")
	}
	r.InputTokens, r.OutputTokens = int32(ni), int32(no)
	switch {
	case load == "sat":
		r.Saturation = true
	case strings.HasSuffix(load, "rps"):
		f, err := strconv.ParseFloat(strings.TrimSuffix(load, "rps"), 64)
		if err != nil || !(f > 0) || f > 1e6 {
			return r, fmt.Errorf("rate must be a positive number of requests per second")
		}
		r.RatePerS = f
	default:
		return r, fmt.Errorf("LOAD must be RATErps or sat")
	}
	if prefix != "" {
		mode := prefix[len(prefix)-1]
		if mode != 'w' && mode != 'c' {
			return r, fmt.Errorf("prefix must end in w (warm) or c (cold)")
		}
		np, err := strconv.ParseInt(prefix[:len(prefix)-1], 10, 32)
		if err != nil || np < 1 || int32(np) > r.InputTokens {
			return r, fmt.Errorf("PREFIX must be a positive integer no larger than IN")
		}
		r.Warm = mode == 'w'
		if r.Warm {
			r.PrefixTokens = int32(np)
		}
	}
	return r, nil
}

// DefaultMatrixOptions returns every MatrixOptions default: the classic
// matrix.
func DefaultMatrixOptions() MatrixOptions {
	return MatrixOptions{
		Rows:        DefaultMatrixRows,
		RowDuration: DefaultRowDuration,
		SatRequests: DefaultSatRequests,
		RowGap:      DefaultRowGap,
		Arrival:     MatrixArrivalPoisson,
		Seed:        DefaultMatrixSeed,
		Model:       "",
	}
}

// Validate reports the first option that cannot be used as given (a zero
// is a value like any other, never the default), naming it in a
// *traces.OptionError.
func (o MatrixOptions) Validate() error {
	switch {
	case o.RowDuration <= 0:
		return traces.OptionErrorf("synth", "Options.RowDuration", "must be > 0, got %v", o.RowDuration)
	case o.SatRequests <= 0:
		return traces.OptionErrorf("synth", "Options.SatRequests", "must be > 0, got %d", o.SatRequests)
	case o.RowGap < 0:
		return traces.OptionErrorf("synth", "Options.RowGap", "must be >= 0, got %v", o.RowGap)
	case o.Arrival != MatrixArrivalPoisson && o.Arrival != MatrixArrivalUniform:
		return traces.OptionErrorf("synth", "Options.Arrival", "must be %s or %s, got %q", MatrixArrivalPoisson, MatrixArrivalUniform, o.Arrival)
	}
	_, err := ParseRows(o.Rows)
	return err
}

// Matrix builds the benchmark matrix as one trace: rows run one after the
// other (separated by RowGap), each row's requests carry the row spec as
// their Class so analyze reports per row. A rate row sends RatePerS ×
// RowDuration requests (Poisson or evenly spaced); a saturation row sends
// SatRequests at once. Warm-prefix rows share the category
// "matrix-<i>-prefix" with PrefixTokens set.
func Matrix(o MatrixOptions) ([]traces.Record, traces.Meta, error) {
	if err := o.Validate(); err != nil {
		return nil, traces.Meta{}, err
	}
	rows, err := ParseRows(o.Rows)
	if err != nil {
		return nil, traces.Meta{}, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x3a7))
	var recs []traces.Record
	var start int64
	for i, row := range rows {
		var times []int64
		end := start
		if row.Saturation {
			for range o.SatRequests {
				times = append(times, start)
			}
		} else {
			dur := float64(o.RowDuration)
			n := int(row.RatePerS*o.RowDuration.Seconds() + 0.5)
			t := 0.0
			for k := 0; k < n; k++ {
				if o.Arrival == MatrixArrivalUniform {
					t = float64(k) / row.RatePerS * 1e9
				} else if k > 0 {
					t += rng.ExpFloat64() / row.RatePerS * 1e9
				}
				if t >= dur {
					break
				}
				times = append(times, start+int64(t))
			}
			end = start + int64(o.RowDuration)
		}
		if len(times) > 0 {
			end = max(end, times[len(times)-1]+1)
		}
		cat := ""
		if row.Warm {
			cat = fmt.Sprintf("matrix-%d-prefix", i+1)
		}
		for _, t := range times {
			rec := traces.NewRecord()
			rec.Seq = int64(len(recs))
			rec.ArrivalNs = t
			rec.InputTokens, rec.OutputTokens = row.InputTokens, row.OutputTokens
			rec.Category, rec.PrefixTokens = cat, row.PrefixTokens
			rec.Class = row.Spec
			rec.Model = o.Model
			recs = append(recs, rec)
		}
		start = end + int64(o.RowGap)
	}
	meta := traces.NewMeta("synth:matrix")
	meta.Set("synth.rows", o.Rows)
	meta.Set("synth.row_duration_ns", strconv.FormatInt(int64(o.RowDuration), 10))
	meta.Set("synth.sat_requests", strconv.Itoa(o.SatRequests))
	meta.Set("synth.row_gap_ns", strconv.FormatInt(int64(o.RowGap), 10))
	meta.Set("synth.arrival", o.Arrival)
	meta.Set("synth.seed", strconv.FormatUint(o.Seed, 10))
	return recs, meta, nil
}
