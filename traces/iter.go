package traces

import (
	"errors"
	"io"
	"iter"
	"slices"
)

// iterBatch is how many records All reads per call: large enough to
// amortize the codec's per-call work, small enough to stay in cache.
const iterBatch = 1024

// All returns the records of r as a stream, in file order. The stream stops
// after the first error, which it yields with a zero Record; a truncated
// file yields every row before the damage, then an error wrapping
// ErrTruncated. It does not close r.
//
// Each Record is yielded by value, but its lists (PrefixBlocks, ChunkNs,
// ChunkTokens) share storage that the next read reuses: call Clone to keep
// a record past the loop body.
func All(r Reader) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		buf := make([]Record, iterBatch)
		for {
			n, err := r.Read(buf)
			for i := range n {
				if !yield(buf[i], nil) {
					return
				}
			}
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(Record{}, err)
				return
			}
		}
	}
}

// AllAhead is All with the reading done on another goroutine, a few
// batches ahead, so decoding and the caller's work use two cores. The
// records' lists are valid until the loop's next step, as with All. r is
// not read once the loop has ended, so the caller may close it then.
func AllAhead(r Reader) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		type batch struct {
			buf []Record
			n   int
			err error
		}
		const ahead = 3
		free := make(chan []Record, ahead)
		for range ahead {
			free <- make([]Record, iterBatch)
		}
		full := make(chan batch, ahead)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer close(full)
			for {
				var buf []Record
				select {
				case buf = <-free:
				case <-stop:
					return
				}
				n, err := r.Read(buf)
				select {
				case full <- batch{buf, n, err}:
				case <-stop:
					return
				}
				if err != nil {
					return
				}
			}
		}()
		defer func() {
			close(stop)
			<-done
		}()
		for b := range full {
			for i := range b.n {
				if !yield(b.buf[i], nil) {
					return
				}
			}
			if b.err == io.EOF {
				return
			}
			if b.err != nil {
				yield(Record{}, b.err)
				return
			}
			free <- b.buf
		}
	}
}

// Values returns a stream over recs, for callers that hold a slice (tests,
// generators). Records are yielded as they are, lists not copied.
func Values(recs []Record) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for i := range recs {
			if !yield(recs[i], nil) {
				return
			}
		}
	}
}

// Collect drains a stream into a slice of independent records (lists
// cloned). On an error it returns the records before it and the error.
// It holds the whole stream: use it where the feature needs every record
// at once, and say so.
func Collect(seq iter.Seq2[Record, error]) ([]Record, error) {
	var out []Record
	for r, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, r.Clone())
	}
	return out, nil
}

// Copy writes every record of seq to w in batches and returns how many it
// wrote. It stops at the first error of either side; w is not closed.
func Copy(w Writer, seq iter.Seq2[Record, error]) (int64, error) {
	buf := make([]Record, iterBatch)
	k := 0
	var n int64
	flush := func() error {
		if k == 0 {
			return nil
		}
		m, err := w.Write(buf[:k])
		n += int64(m)
		k = 0
		return err
	}
	for r, err := range seq {
		if err != nil {
			if ferr := flush(); ferr != nil {
				return n, errors.Join(err, ferr)
			}
			return n, err
		}
		// The stream may reuse r's lists on its next step: copy them into
		// the slot's own storage, which is reused batch after batch.
		buf[k].copyFrom(&r)
		k++
		if k == len(buf) {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	return n, flush()
}

// copyFrom sets r to src, copying src's lists into r's own storage.
func (r *Record) copyFrom(src *Record) {
	pb, as, cn, ct := r.PrefixBlocks, r.AfterSeqs, r.ChunkNs, r.ChunkTokens
	*r = *src
	// Every codec writes an empty list and a nil one alike.
	r.PrefixBlocks = append(pb[:0], src.PrefixBlocks...)
	r.AfterSeqs = append(as[:0], src.AfterSeqs...)
	r.ChunkNs = append(cn[:0], src.ChunkNs...)
	r.ChunkTokens = append(ct[:0], src.ChunkTokens...)
}

// Clone returns a copy of r whose lists share nothing with r's.
func (r *Record) Clone() Record {
	c := *r
	c.PrefixBlocks = slices.Clone(r.PrefixBlocks)
	c.AfterSeqs = slices.Clone(r.AfterSeqs)
	c.ChunkNs = slices.Clone(r.ChunkNs)
	c.ChunkTokens = slices.Clone(r.ChunkTokens)
	return c
}

// NewSliceReader returns a Reader over recs with metadata m, for callers
// that hold a trace in memory and pass it where a Reader is taken. Records
// are handed out as they are, lists not copied.
func NewSliceReader(recs []Record, m Meta) Reader { return &sliceReader{recs: recs, meta: m} }

type sliceReader struct {
	recs []Record
	meta Meta
	rows int64
}

func (r *sliceReader) Read(buf []Record) (int, error) {
	n := copy(buf, r.recs)
	r.recs = r.recs[n:]
	r.rows += int64(n)
	if len(r.recs) == 0 {
		return n, io.EOF
	}
	return n, nil
}

func (r *sliceReader) Meta() Meta       { return r.meta }
func (r *sliceReader) Stats() ReadStats { return ReadStats{Rows: r.rows} }
func (r *sliceReader) Close() error     { return nil }
