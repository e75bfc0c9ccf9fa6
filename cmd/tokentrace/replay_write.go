package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// replayWrite is where a replay's results go and what becomes of its
// journal.
type replayWrite struct {
	out, journal string
	keepJournal  bool
	co           traces.CreateOptions
}

// write writes res to OUT (from the journal when the records live there),
// removes or keeps the journal, and prints the summary. A failed journal
// write stopped the run: the journal is cut short and must never be called
// complete.
func (w replayWrite) write(c *cli.Context, res *replay.Result, runErr error) error {
	io := stdio(c)
	var jerr *replay.JournalError
	journalOK := !errors.As(runErr, &jerr)
	if _, err := res.Write(context.WithoutCancel(c.Context), w.out, w.co); err != nil {
		msg := fmt.Errorf("write results: %w", err)
		switch {
		case !journalOK:
			msg = fmt.Errorf("%w; %w: the run's results were not saved", msg, jerr)
		case w.journal != "":
			msg = fmt.Errorf("%w (the journal %s holds every finished request)", msg, w.journal)
		}
		return msg
	}
	switch {
	case !journalOK:
		if !w.keepJournal {
			os.Remove(jerr.Path) // OUT holds every finished request
		}
	case runErr != nil:
		fmt.Fprintf(io.err, "tokentrace replay: %v\n", runErr)
	case w.journal != "" && !w.keepJournal:
		os.Remove(w.journal)
	}
	sw := io.out
	if w.out == "-" {
		sw = io.err
	}
	res.Summary.WriteText(sw)
	if c.Context.Err() != nil {
		fmt.Fprintf(io.err, "tokentrace replay: interrupted; wrote %d finished requests to %s\n", res.Count, w.out)
	}
	if !journalOK {
		kept := "removed"
		if w.keepJournal {
			kept = "kept as " + jerr.Path
		}
		return fmt.Errorf("journal write failed, sending stopped: %w; %s holds the %d requests that finished (the incomplete journal was %s)", jerr.Err, w.out, res.Count, kept)
	}
	return nil
}
