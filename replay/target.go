package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/tokentrace/tokentrace/replay/otlp"
	"github.com/tokentrace/tokentrace/replay/scrape"
	"github.com/tokentrace/tokentrace/sim"
	"github.com/tokentrace/tokentrace/traces"
)

// TargetOptions say what a replay runs against and what runs beside it.
// Start from DefaultTargetOptions: a field's zero is a value of its own,
// never its default.
type TargetOptions struct {
	// URL is the server; "" starts the built-in simulator in process,
	// configured by Sim. Defaults to "".
	URL string
	// Sim configures the built-in simulator when URL is "" (ParseTarget
	// gives it from a target spec; nil there is refused): one engine, or a
	// fleet of them behind a router (Sim.Fleet), whose /metrics
	// ScrapeBuiltin scrapes per replica (its series carry pod and role
	// labels). Defaults to sim.DefaultOptions().
	Sim *sim.Options
	// LongestRequest (input + output tokens) raises the simulator's context
	// length so it takes the trace's longest request; 0 leaves it as set.
	// Defaults to 0.
	LongestRequest int
	// MetricsURL is a Prometheus /metrics endpoint scraped every
	// MetricsInterval during the run ("": none, or the built-in
	// simulator's with ScrapeBuiltin). Defaults to "".
	MetricsURL string
	// MetricsInterval is the scrape interval (> 0). Defaults to
	// scrape.DefaultInterval.
	MetricsInterval time.Duration
	// ScrapeBuiltin scrapes the built-in simulator's /metrics when
	// MetricsURL is "". Defaults to false.
	ScrapeBuiltin bool
	// MetricsInstanceLabel and MetricsRoleLabel are the labels that tell
	// a fleet's replicas apart on the scraped series and hold their roles
	// ("": scrape.DefaultInstanceLabel and scrape.DefaultRoleLabel, the
	// built-in fleet's pod and role, where the series carry them). Default
	// to "".
	MetricsInstanceLabel, MetricsRoleLabel string
	// MetricsInstanceLabelOption and MetricsRoleLabelOption are what the
	// scraper's warnings call those two ("": the scraper's own option
	// names, scrape.Scraper.InstanceLabelOption). Default to "".
	MetricsInstanceLabelOption, MetricsRoleLabelOption string
	// OTLPListen runs an OTLP/HTTP receiver there for the server's spans
	// ("": none); the built-in simulator exports to it. Defaults to "".
	OTLPListen string
	// OTLPGrace is how long Finish waits for late spans (>= 0). Defaults
	// to otlp.DefaultGrace.
	OTLPGrace time.Duration
	// Receiver tunes the OTLP receiver. Defaults to
	// otlp.DefaultReceiverOptions().
	Receiver otlp.ReceiverOptions
}

// DefaultTargetOptions returns every TargetOptions default: the built-in
// simulator with its defaults, nothing beside it.
func DefaultTargetOptions() TargetOptions {
	so := sim.DefaultOptions()
	return TargetOptions{
		Sim:             &so,
		MetricsInterval: scrape.DefaultInterval,
		OTLPGrace:       otlp.DefaultGrace,
		Receiver:        otlp.DefaultReceiverOptions(),
	}
}

// Validate reports the options StartTarget cannot use as given, each a
// *traces.OptionError naming the option.
func (o *TargetOptions) Validate() error {
	switch {
	case o.URL == "" && o.Sim == nil:
		return optionErr("TargetOptions.Sim", "nil: the built-in simulator (URL \"\") needs its configuration")
	case o.LongestRequest < 0:
		return optionErr("TargetOptions.LongestRequest", "must be >= 0, got %d", o.LongestRequest)
	case o.MetricsInterval <= 0:
		return optionErr("TargetOptions.MetricsInterval", "must be > 0, got %v", o.MetricsInterval)
	case o.OTLPGrace < 0:
		return optionErr("TargetOptions.OTLPGrace", "must be >= 0, got %v", o.OTLPGrace)
	}
	return o.Receiver.Validate()
}

// Target is a replay's server and its companions (the in-process
// simulator, the metrics scraper, the OTLP receiver), started together by
// StartTarget and stopped by Close, so every command wires them the same
// way.
type Target struct {
	// URL is where requests go; Builtin says it is the in-process
	// simulator, which serves Model.
	URL     string
	Builtin bool
	Model   string
	// MetricsURL is scraped during the run ("" = nothing is).
	MetricsURL string
	// OTLPAddr is the receiver's address ("" = none).
	OTLPAddr string

	o       TargetOptions
	simSpec string // the built-in simulator's, as configured (FormatSimTarget)
	srv     *sim.Server
	rcv     *otlp.Receiver
	scraper *scrape.Scraper
	samples []traces.MetricsSample
	stats   scrape.Stats
	stop    context.CancelFunc
	done    chan struct{}
	stopRcv context.CancelFunc
}

// StartTarget starts what o asks for. Errors name the option.
func StartTarget(ctx context.Context, o TargetOptions) (*Target, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	t := &Target{URL: o.URL, MetricsURL: o.MetricsURL, o: o}
	if o.OTLPListen != "" {
		rcv, err := otlp.NewReceiver(o.Receiver)
		if err != nil {
			return nil, err
		}
		t.rcv = rcv
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		t.stopRcv = cancel
		addr, err := t.rcv.Start(rctx, o.OTLPListen)
		if err != nil {
			cancel()
			return nil, optionErr("TargetOptions.OTLPListen", "%w", err)
		}
		t.OTLPAddr = addr
	}
	if o.URL == "" {
		so := *o.Sim
		// The configuration as asked for: a rerun sizes the context for
		// its trace again.
		t.simSpec = FormatSimTarget(so)
		if t.OTLPAddr != "" {
			so.OTLPTracesEndpoint = "http://" + t.OTLPAddr
		}
		so = so.AdmitLongest(o.LongestRequest)
		srv, err := sim.Start(ctx, so)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("replay: start the built-in simulator: %w", err)
		}
		t.srv, t.URL, t.Builtin, t.Model = srv, srv.URL, true, so.Model
		if t.MetricsURL == "" && o.ScrapeBuiltin {
			t.MetricsURL = srv.URL + "/metrics"
		}
	}
	return t, nil
}

// Apply points o at the target: its URL, the simulator's model when
// o.Model is empty (a trace's production model names are not served by the
// simulator; o.ModelMap still wins) and its configuration for the results
// (Options.SimTarget), traceparent headers when spans are received, and an
// OnStart hook that starts the scraper on the run's clock.
func (t *Target) Apply(o *Options) {
	o.URL, o.SimTarget = t.URL, t.simSpec
	if t.Builtin && o.Model == "" {
		o.Model = t.Model
	}
	if t.Builtin && t.srv.Replicas()[0] != "" {
		// The fleet names who served each request (traces.ReplicaHeader).
		if o.ReplicaHeader == "" {
			o.ReplicaHeader = traces.ReplicaHeader
		}
		if o.PrefillReplicaHeader == "" {
			o.PrefillReplicaHeader = traces.PrefillReplicaHeader
		}
		if o.RouteReasonHeader == "" {
			o.RouteReasonHeader = traces.RouteReasonHeader
		}
	}
	if t.rcv != nil {
		o.TraceParent = true
	}
	if t.MetricsURL == "" {
		return
	}
	t.scraper = &scrape.Scraper{URL: t.MetricsURL, Interval: t.o.MetricsInterval,
		InstanceLabel: t.o.MetricsInstanceLabel, RoleLabel: t.o.MetricsRoleLabel,
		InstanceLabelOption: t.o.MetricsInstanceLabelOption, RoleLabelOption: t.o.MetricsRoleLabelOption}
	ctx, stop := context.WithCancel(context.Background())
	t.stop, t.done = stop, make(chan struct{})
	prev := o.OnStart
	o.OnStart = func(t0 time.Time) {
		if prev != nil {
			prev(t0)
		}
		t.scraper.Start = t0
		go func() {
			defer close(t.done)
			t.samples, t.stats, _ = t.scraper.Collect(ctx)
		}()
	}
}

// Finish ends the companions' part of a run: it stops the scraper, waits up
// to OTLPGrace for the spans of res's requests and joins them, and records
// both in res.Meta. It returns the metrics series (nil when nothing was
// scraped) and how many successful requests got no span.
func (t *Target) Finish(ctx context.Context, res *Result) (samples []traces.MetricsSample, unmatched int) {
	if t.scraper != nil {
		t.stop()
		if t.scraper.Start.IsZero() {
			close(t.done) // the run never started
		}
		<-t.done
		t.stats.Annotate(&res.Meta, t.scraper)
		samples = t.samples
	}
	if t.rcv != nil {
		ids := make([]string, 0, len(res.Records))
		for i := range res.Records {
			ids = append(ids, res.Records[i].RequestID)
		}
		t.rcv.Expect(ids...)
		t.rcv.Wait(context.WithoutCancel(ctx), ids, t.o.OTLPGrace)
		_, unmatched = t.rcv.JoinRecords(res.Records, false)
		st := t.rcv.Stats()
		st.Annotate(&res.Meta)
		res.AddTimingSource(otlp.TimingSource, int(st.Matched))
	}
	return samples, unmatched
}

// Close stops the simulator and the receiver.
func (t *Target) Close() {
	if t.stop != nil {
		t.stop()
	}
	if t.srv != nil {
		t.srv.Close()
	}
	if t.stopRcv != nil {
		t.stopRcv()
	}
}
