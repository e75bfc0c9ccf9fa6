package formats

import (
	"bufio"
	"io"
	"math"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// tracelabIsCSV reports whether the input's first non-blank byte starts
// something other than a JSON object (TraceLab's replay CSV starts with its
// header line).
func tracelabIsCSV(br *bufio.Reader) bool {
	for n := 1; n <= 4096; n++ {
		b, _ := br.Peek(n)
		if len(b) < n {
			return false // empty or all blank: the JSON reader says so
		}
		switch c := b[n-1]; c {
		case ' ', '\t', '\r', '\n', '\xef', '\xbb', '\xbf': // blanks, a UTF-8 byte order mark
		default:
			return c != '{'
		}
	}
	return false
}

// newTraceLabCSVReader reads the replay CSV that TraceLab's csv_export
// utility writes for simulators (uw-syfi/TraceLab
// artifacts/trace_facts/csv_export/convert.py @ b889eb7):
//
//	id,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len
//
// one row per round, grouped by session (id) in round order. input_len is
// the tokens the round appends to its context, prefix_len the context it
// resends (the previous rounds' inputs and outputs), output_len the decode
// length; arrival_time is the session's arrival in milliseconds (a synthetic
// Poisson or constant process, the same on each of its rows);
// tool_wait_after_ms is the tool time after the round, before the session's
// next one. id, input_len, output_len and arrival_time are required,
// columns are found by name.
//
// Rows map to Records as:
//   - Session: id, numbered from 1 in order of first appearance; Turn:
//     round_idx + 1 (the session's row count when absent).
//   - InputTokens = prefix_len + input_len (the whole prompt);
//     OutputTokens = output_len.
//   - ParentSeq: the session's previous row; ThinkNs: the previous row's
//     tool_wait_after_ms (so `replay --sessions closed` waits that long
//     after the previous round finishes).
//   - ArrivalNs: the first round's is arrival_time; a later round's is the
//     later of its arrival_time and the previous round's arrival plus the
//     tool wait between them. The file has no service times, so that is a
//     lower bound (it counts the previous round's service as 0): open-loop
//     replay of a later round is early by the recorded service times, and
//     the closed-session replay above is the faithful one.
//
// The importer holds one small entry per session.
func newTraceLabCSVReader(r io.Reader, br *bufio.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	c, err := newImportCSV(br, name, o)
	if err != nil {
		return nil, err
	}
	d := &tracelabCSVDecoder{c: c, sessions: map[string]*tracelabCSVSession{}}
	if d.id, err = c.require("id"); err != nil {
		return nil, err
	}
	if d.lengths, err = c.requireLengths("input_len", "output_len"); err != nil {
		return nil, err
	}
	if d.at, err = c.require("arrival_time"); err != nil {
		return nil, err
	}
	d.round, d.wait, d.prefix = c.col("round_idx"), c.col("tool_wait_after_ms"), c.col("prefix_len")
	m := traces.NewMeta(importSource("tracelab", name))
	m.Set("tracelab_layout", "replay_csv")
	return newImportReader(r, d, m, o), nil
}

type tracelabCSVSession struct {
	num, lastSeq, lastArrival, lastWait int64
	rows                                int32
}

type tracelabCSVDecoder struct {
	c                           *importCSV
	id, at, round, wait, prefix int
	lengths                     importLengths
	sessions                    map[string]*tracelabCSVSession
	kept                        int64
}

func (d *tracelabCSVDecoder) next(rec *traces.Record) error {
	row, err := d.c.row()
	if err != nil {
		return err
	}
	name, line := d.c.name, d.c.line
	bad := func(format string, a ...any) error { return importRowError(name, line, format, a...) }
	id := strings.TrimSpace(row[d.id])
	if id == "" {
		return bad("id: empty")
	}
	in, out, err := d.lengths.parse(row)
	if err != nil {
		return err
	}
	at, err := parseScaled(row[d.at], 6)
	if err != nil {
		return bad("arrival_time: %v", err)
	}
	var prefix int32
	if d.prefix >= 0 {
		if prefix, err = parseCount(row[d.prefix]); err != nil {
			return bad("prefix_len: %v", err)
		}
	}
	if int64(prefix)+int64(in) > 1<<31-1 {
		return bad("prefix_len + input_len: out of range")
	}
	wait := int64(0)
	if d.wait >= 0 {
		if s := strings.TrimSpace(row[d.wait]); s != "" {
			if wait, err = parseScaled(s, 6); err != nil {
				return bad("tool_wait_after_ms: %v", err)
			}
		}
	}
	turn := int32(-1)
	if d.round >= 0 {
		ri, err := parseCount(row[d.round])
		if err != nil || ri == 1<<31-1 {
			return bad("round_idx: not an index")
		}
		turn = ri + 1
	}
	s := d.sessions[id]
	if s == nil {
		s = &tracelabCSVSession{num: int64(len(d.sessions)) + 1, lastSeq: traces.NotReported}
		rec.ArrivalNs = at
	} else {
		if s.lastWait > math.MaxInt64-s.lastArrival {
			return bad("arrival_time + tool waits: out of range")
		}
		rec.ArrivalNs = max(at, s.lastArrival+s.lastWait)
		rec.ParentSeq = s.lastSeq
		rec.ThinkNs = s.lastWait
	}
	if turn < 0 {
		turn = s.rows + 1
	}
	rec.Session, rec.Turn = s.num, turn
	rec.InputTokens, rec.OutputTokens = prefix+in, out
	d.sessions[id] = s
	s.rows++
	s.lastSeq, s.lastArrival, s.lastWait = d.kept, rec.ArrivalNs, wait
	d.kept++
	return nil
}
