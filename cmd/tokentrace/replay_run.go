package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/replay/otlp"
	"github.com/tokentrace/tokentrace/replay/scrape"
	"github.com/tokentrace/tokentrace/traces"
)

// runReplay is the replay command: it maps a to replay's options, plans
// the run over the trace, starts the target (a server, or the built-in
// simulator), runs, joins what the target gathered to the results, writes
// them and says whether the run reproduced the trace. Its errors keep the
// library's chain (errors.Is finds replay.ErrNothingToSend,
// traces.ErrTruncated) and name flags where the library named options.
// longWait is the wait in a replay's schedule that replay warns of.
const longWait = time.Hour

func runReplay(ctx context.Context, a *replayArgs, s streams) error {
	o, to, err := a.options()
	if err != nil {
		return err
	}
	co, err := a.sort.options()
	if err != nil {
		return err
	}
	src, err := traceInOf(s, &a.read, "replay", "replay sorts the trace by arrival in memory").source(a.trace)
	if err != nil {
		return err
	}
	// One pass over the trace plans the run; the run reads it again, a
	// little ahead of the schedule.
	plan, err := replay.Scan(ctx, src, o)
	if err != nil {
		return flagged(err, replayFlags)
	}
	if plan.LongestWait >= longWait {
		// Said before the run, not after the wait: a row far in the
		// future would otherwise look like a replay that hangs.
		fmt.Fprintf(s.err, "tokentrace replay: warning: the run waits %v with nothing to send before seq %d (at --speed %g); --window FROM,TO or a higher --speed shortens it\n",
			plan.LongestWait.Round(time.Second), plan.LongestWaitSeq, o.Speed)
	}
	tgt, metricsOut, err := a.startTarget(ctx, to, &o, plan.Longest, s)
	if err != nil {
		return err
	}
	defer tgt.Close()
	if err := o.Validate(); err != nil {
		return usageError(err, replayFlags)
	}
	journal := a.runOptions(&o, tgt, s)
	// Process-wide knobs are the CLI's to set, for the run only: the
	// results are written with the collector's usual pace.
	restore := replay.TuneProcess(1)
	res, runErr := plan.Run(ctx, plan.Meta, o)
	restore()
	if res == nil {
		return flagged(runErr, replayFlags)
	}
	a.joinTarget(ctx, tgt, res, metricsOut, s)
	res.Meta.Command = a.commandLine
	w := replayWrite{out: a.out, journal: journal, keepJournal: a.keepJournal, co: co}
	if err := w.write(ctx, s, res, runErr); err != nil {
		return err
	}
	return replayValid(&res.Summary, a.maxFailed, a.maxLateness)
}

// options maps the flags to replay's options and the target's. Bad values
// fail here, before the trace is read or anything starts, as usage errors
// naming the flag.
func (a *replayArgs) options() (replay.Options, replay.TargetOptions, error) {
	o := a.o
	o.API = a.api
	to, err := a.target()
	if err != nil {
		return o, to, err
	}
	o.URL = to.URL
	o, err = a.runFlags(o)
	return o, to, err
}

// target is what --target (or --url) names: a server, or the built-in
// simulator (the default) with --sim-per-request-metrics.
func (a *replayArgs) target() (replay.TargetOptions, error) {
	spec, given := a.targetSpec, a.targetSet || a.targetSpec != ""
	switch {
	case given && a.o.URL != "":
		return replay.TargetOptions{}, usageErrorf("--url %s and --target %s both name the target: give one (--target takes a URL too)", replay.RedactURL(a.o.URL), replay.RedactURL(spec))
	case a.o.URL != "":
		to := replay.DefaultTargetOptions()
		to.URL, to.Sim = a.o.URL, nil // a server, not the simulator
		return to, nil
	case !given:
		spec = "sim"
	}
	base := replay.BuiltinSim()
	base.PerRequestMetrics = a.simMetrics
	to, err := replay.ParseTarget(spec, base)
	if err != nil {
		return to, usageError(err, replayFlags)
	}
	return to, nil
}

// runFlags maps the flags of the run itself onto o.
func (a *replayArgs) runFlags(o replay.Options) (replay.Options, error) {
	var err error
	if a.window != "" {
		if o.WindowFrom, o.WindowTo, err = replay.ParseWindow(a.window); err != nil {
			return o, usageError(err, replayFlags)
		}
	}
	if o.ShardIndex, o.ShardCount, err = replay.ParseShard(a.shard); err != nil {
		return o, usageError(err, replayFlags)
	}
	if a.startAt != "" {
		if o.StartAt, err = time.Parse(time.RFC3339, a.startAt); err != nil {
			return o, usageErrorf("--start-at: want RFC3339 (2026-11-22T03:00:00Z), got %q", a.startAt)
		}
	}
	if o.Headers, err = parseHeaders(a.headers.v); err != nil {
		return o, usageError(err, nil)
	}
	if a.apiKeyFile != "" {
		if o.APIKey, err = readAPIKey(a.apiKeyFile); err != nil {
			return o, err
		}
	}
	if a.maxLateness <= 0 {
		return o, usageErrorf("--max-lateness: must be > 0")
	}
	if !(a.maxFailed >= 0 && a.maxFailed <= 1) {
		return o, usageErrorf("--max-failed: want a share from 0 to 1, got %v", a.maxFailed)
	}
	if err := runRecordOptions(&o, a.background.v, a.metadata.v, a.modelMap.v, !a.noDescribe); err != nil {
		return o, err
	}
	if a.affinity {
		o.SessionHeader = a.sessionHeader
	}
	o.NoContextGrowth = !a.contextGrowth
	// The built-in simulator's URL is not known yet.
	probe := o
	if probe.URL == "" {
		probe.URL = "http://built-in"
	}
	if err := probe.Validate(); err != nil {
		return o, usageError(err, replayFlags)
	}
	if a.metricsInterval <= 0 {
		return o, usageErrorf("--metrics-interval: must be > 0")
	}
	return o, nil
}

// startTarget starts what the run goes against (to: a server, or the
// built-in simulator sized for the trace's longest request) with its OTLP
// receiver and metrics scraper, and points o at it. metricsOut is where
// the scraped series go ("" when nothing is scraped).
func (a *replayArgs) startTarget(ctx context.Context, to replay.TargetOptions, o *replay.Options, longest int, s streams) (tgt *replay.Target, metricsOut string, err error) {
	to.LongestRequest = longest
	to.MetricsURL, to.MetricsInterval = a.metricsURL, a.metricsInterval
	to.MetricsInstanceLabel, to.MetricsRoleLabel = a.instanceLabel, a.roleLabel
	to.MetricsInstanceLabelOption, to.MetricsRoleLabelOption = "--metrics-instance-label", "--metrics-role-label"
	// The built-in simulator is scraped when results go to a file, so
	// analyze can show the server's queue beside the tail.
	to.ScrapeBuiltin = a.metricsOut != "" || a.out != "-"
	to.OTLPListen, to.OTLPGrace = a.otlpListen, a.otlpGrace
	tgt, err = replay.StartTarget(ctx, to)
	if err != nil {
		return nil, "", flagged(err, replayFlags)
	}
	tgt.Apply(o)
	if tgt.OTLPAddr != "" {
		fmt.Fprintf(s.err, "tokentrace replay: OTLP/HTTP receiver at http://%s%s\n", tgt.OTLPAddr, otlp.TracesPath)
	}
	if tgt.Builtin {
		fmt.Fprintf(s.err, "tokentrace replay: replaying against the built-in simulator (%s) at %s (model %s)\n", o.SimTarget, tgt.URL, o.Model)
	}
	metricsOut = a.metricsOut
	if tgt.MetricsURL != "" && metricsOut == "" {
		if a.out == "-" {
			tgt.Close()
			return nil, "", usageErrorf("--metrics-out: required when --out is -")
		}
		metricsOut = traces.SamplesPathFor(a.out) // where analyze looks for it
	}
	return tgt, metricsOut, nil
}

// runOptions sets the options of the run itself: the journal (returned;
// "" for none), where results live while it goes, progress and notices.
func (a *replayArgs) runOptions(o *replay.Options, tgt *replay.Target, s streams) (journal string) {
	journal = a.journal
	if journal == "" && a.out != "-" {
		journal = replay.JournalPath(a.out)
	}
	o.Journal = journal
	keepEarlierJournal(journal, s)
	// Results stream to the journal and leave memory, unless spans must be
	// joined to them at the end.
	o.RecordsInJournal = journal != "" && tgt.OTLPAddr == ""
	// Progress: one line rewritten every second on a terminal, a plain line
	// every 10 s in logs and pipes.
	if !a.quiet {
		o.Progress = s.err
		if !isTerminal(s.err) {
			o.Progress = prefixWriter{s.err, "tokentrace "}
			o.ProgressLines, o.ProgressPeriod = true, 10*time.Second
		}
	}
	o.Log = prefixWriter{s.err, "tokentrace "}
	return journal
}

// keepEarlierJournal moves a journal already at path aside, under a name
// with its time: it is what a killed (or --keep-journal) run finished, its
// only record, and this run would truncate it.
func keepEarlierJournal(path string, s streams) {
	fi, err := os.Stat(path)
	if path == "" || err != nil || !fi.Mode().IsRegular() {
		return
	}
	stem := strings.TrimSuffix(path, ".jsonl") + "." + fi.ModTime().UTC().Format("20060102T150405")
	aside := stem + ".jsonl"
	for i := 2; ; i++ {
		if _, err := os.Lstat(aside); os.IsNotExist(err) {
			break
		}
		aside = fmt.Sprintf("%s-%d.jsonl", stem, i)
	}
	if err := os.Rename(path, aside); err == nil {
		fmt.Fprintf(s.err, "tokentrace replay: note: the journal an earlier run left at %s (a run that did not finish, or one told to keep it) is kept as %s\n", path, aside)
	}
}

// joinTarget joins the target's OTLP spans to the results and writes the
// scraped series to metricsOut; neither failing fails the run.
func (a *replayArgs) joinTarget(ctx context.Context, tgt *replay.Target, res *replay.Result, metricsOut string, s streams) {
	samples, unmatched := tgt.Finish(ctx, res)
	if tgt.MetricsURL != "" {
		sm := res.Meta
		sm.Source = "replay-metrics"
		if err := traces.WriteSamples(metricsOut, sm, samples); err != nil {
			fmt.Fprintf(s.err, "tokentrace replay: %v\n", err)
		}
		if w := res.Meta.Get(scrape.MetaMetricsWarnings); w != "" {
			fmt.Fprintf(s.err, "tokentrace replay: metrics series: %s\n", w)
		}
	}
	if unmatched > 0 {
		fmt.Fprintf(s.err, "tokentrace replay: %d successful requests have no OTLP span (left as not reported)\n", unmatched)
	}
}
