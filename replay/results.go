package replay

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tokentrace/tokentrace/traces"
)

// Write writes the run's results file name (any traces format, "-" is
// stdout JSONL) with res.Meta and options o (the Parquet writer's sort
// budget and spill directory), and returns how many records it wrote.
// With Options.RecordsInJournal the records are streamed from the journal
// (Result.Journal), in bounded memory, plus those Result.Records holds
// because a journal write failed; the journal itself is left to the
// caller. A failed write leaves no file at name.
func (res *Result) Write(ctx context.Context, name string, o traces.CreateOptions) (int64, error) {
	w, err := traces.CreateWith(name, res.Meta, o)
	if err != nil {
		return 0, err
	}
	n, err := res.copyTo(ctx, w)
	if err != nil {
		traces.Abort(w)
		return n, err
	}
	return n, w.Close()
}

func (res *Result) copyTo(ctx context.Context, w traces.Writer) (int64, error) {
	var n int64
	if res.Journal != "" {
		// After a failed journal write the failed batch is in Records
		// too, maybe also in part in the journal: Records wins.
		inMem := make(map[int64]bool, len(res.Records))
		for i := range res.Records {
			inMem[res.Records[i].Seq] = true
		}
		rd, err := traces.Open(res.Journal)
		if err != nil {
			return 0, fmt.Errorf("read journal: %w", err)
		}
		defer rd.Close()
		buf := make([]traces.Record, 1024)
		for {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			k, rerr := rd.Read(buf)
			keep := buf[:0]
			for i := range buf[:k] {
				if !inMem[buf[i].Seq] {
					keep = append(keep, buf[i])
				}
			}
			m, err := w.Write(keep)
			n += int64(m)
			if err != nil {
				return n, err
			}
			if rerr == io.EOF {
				break
			}
			// A journal cut short by a failed write ends in damage; the
			// rows before it are the run's.
			if errors.Is(rerr, traces.ErrTruncated) {
				break
			}
			if rerr != nil {
				return n, fmt.Errorf("read journal %s: %w", res.Journal, rerr)
			}
		}
	}
	m, err := w.Write(res.Records)
	return n + int64(m), err
}
