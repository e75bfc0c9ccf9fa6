package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
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
func (w replayWrite) write(ctx context.Context, io streams, res *replay.Result, runErr error) error {
	var jerr *replay.JournalError
	journalOK := !errors.As(runErr, &jerr)
	if _, err := res.Write(context.WithoutCancel(ctx), w.out, w.co); err != nil {
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
	if ctx.Err() != nil {
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

// replayValid is exit 3 for a run that measured failures, not latency
// (more than maxFailed of the sent requests failed), or that did not keep
// the trace's timing (lateness p99 over maxLateness).
func replayValid(s *replay.Summary, maxFailed float64, maxLateness time.Duration) error {
	if sh := s.FailedShare(); sh > maxFailed {
		reason := ""
		if top := s.TopFailureReasons(1); len(top) > 0 {
			reason = "; most often " + top[0]
		}
		return withCode(exitNotReproduced, fmt.Errorf("%d of %d requests failed (%.0f%% > --max-failed %.0f%%)%s: the run measured failures, not the server's latency", s.Failed, s.Sent, 100*sh, 100*maxFailed, reason))
	}
	if s.LatenessP99 > maxLateness {
		// What the replayer's own CPU went through is the first suspect.
		var why string
		if s.Realtime != "" && s.Realtime != replay.RealtimeNotAsked {
			why += fmt.Sprintf("; the dispatcher ran without the real-time class (%s)", s.Realtime)
		}
		if s.ThrottledTime > 0 {
			why += fmt.Sprintf("; the replayer's cgroup was throttled for %v by its CPU quota (%s)", s.ThrottledTime.Round(time.Millisecond), s.CPUQuota)
		}
		if s.StealTime > 0 {
			why += fmt.Sprintf("; the hypervisor took %v of the replayer's CPUs (steal)", s.StealTime.Round(time.Millisecond))
		}
		return withCode(exitNotReproduced, fmt.Errorf("lateness p99 %v exceeds --max-lateness %v: the run did not reproduce the trace's timing (use a lower --speed, more replayers with --shard, or a bigger machine)%s", s.LatenessP99.Round(time.Microsecond), maxLateness, why))
	}
	return nil
}
