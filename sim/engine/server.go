package engine

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokentrace/tokentrace/internal/closeonce"
	"github.com/tokentrace/tokentrace/traces"
)

// Server is a running engine behind its HTTP API: one engine goroutine
// and the handler (Handler) that serves its endpoints.
type Server struct {
	o     Options
	start time.Time
	st    *stats
	eng   *engine
	mux   *http.ServeMux

	mu      sync.Mutex
	pending []*request
	truth   []traces.Record
	// pulled are remote requests whose KV arrived (Options.KVPull), for
	// the engine goroutine to take.
	pulled []*request

	wake     chan struct{}
	stop     chan struct{}
	loopDone chan struct{}
	aborts   atomic.Int64
	seq      atomic.Int64
	ids      atomic.Uint64
	vclock   atomic.Int64 // engine clock in Virtual mode (last step end)
	// Virtual mode lockstep: publishes not yet written by their handlers.
	outstanding atomic.Int64
	ackCh       chan struct{}
	// lockstepTimeouts counts Virtual steps that gave up waiting for a stream.
	lockstepTimeouts atomic.Int64

	otlp *otlpExporter

	closer closeonce.Closer
}

// NewServer validates o and runs the engine until Close or until ctx is
// done. It does not listen: the caller serves its Handler (sim.Start
// mounts each replica's behind the fleet's endpoint).
func NewServer(ctx context.Context, o Options) (*Server, error) {
	s, err := newServer(o)
	if err != nil {
		return nil, err
	}
	go s.loop()
	s.closer.Watch(ctx, s.stopAndWrite)
	return s, nil
}

func newServer(o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	s := &Server{
		o:        o,
		start:    time.Now(),
		st:       newStats(o.MaxModelLen),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
		ackCh:    make(chan struct{}, 1),
	}
	s.st.kvBytesPerToken = o.KVBytesPerToken
	s.eng = newEngine(o, s.st)
	if o.KVPull != nil {
		s.eng.onRemote = func(r *request, tokens int, _ int64) {
			o.KVPull.Pull(tokens, func() {
				s.mu.Lock()
				s.pulled = append(s.pulled, r)
				s.mu.Unlock()
				s.poke()
			})
		}
	}
	s.eng.onFinish = func(r *request, status string) {
		if status != traces.StatusOK {
			if st := r.abortStatus; st != "" {
				status = st
			}
		}
		t := truthRecord(r, status)
		if s.otlp != nil && status == traces.StatusOK {
			s.otlp.add(s.span(r))
		}
		s.mu.Lock()
		s.truth = append(s.truth, t)
		s.mu.Unlock()
	}
	if o.OTLPTracesEndpoint != "" {
		ep, _ := otlpEndpoint(o.OTLPTracesEndpoint)
		s.otlp = newOTLPExporter(ep)
	}
	if o.Virtual {
		s.eng.onPublish = func(r *request) {
			if r.ackPending.CompareAndSwap(false, true) {
				s.outstanding.Add(1)
			}
		}
	}
	s.mux = http.NewServeMux()
	s.routes()
	return s, nil
}

// Handler is the simulator's HTTP handler (to mount elsewhere or wrap).
func (s *Server) Handler() http.Handler { return s.mux }

// Options returns the options the server runs with.
func (s *Server) Options() Options { return s.o }

// StartTime is the server's clock origin: truth offsets count from it.
func (s *Server) StartTime() time.Time { return s.start }

// Meter returns the server's metrics.
func (s *Server) Meter() Meter { return Meter{s.st} }

// Close stops the engine and writes TruthOut. It is idempotent and
// returns the same error every time.
func (s *Server) Close() error { return s.closer.Close(s.stopAndWrite) }

// stopAndWrite stops the engine and writes TruthOut (once: on Close, or
// when NewServer's ctx ends).
func (s *Server) stopAndWrite() error {
	close(s.stop)
	<-s.loopDone
	if s.otlp != nil {
		s.otlp.close()
	}
	if s.o.TruthOut != "" {
		if err := traces.WriteAll(s.o.TruthOut, TruthMeta(s.o), s.Truth()); err != nil {
			return fmt.Errorf("sim: write truth %s: %w", s.o.TruthOut, err)
		}
	}
	return nil
}

// TruthMeta is the metadata of a truth file (Options.TruthOut) of an
// engine configured by o.
func TruthMeta(o Options) traces.Meta {
	m := traces.NewMeta("sim")
	m.Tokenizer = "sim-builtin"
	m.BlockSize = o.BlockSize
	m.Set("sim.preset", o.Preset)
	m.Set("sim.model", o.Model)
	return m
}

// Truth returns one row per finished (or refused) request as the engine saw
// it, ordered by arrival (Seq). See the package doc for the timing columns.
func (s *Server) Truth() []traces.Record {
	s.mu.Lock()
	t := append([]traces.Record(nil), s.truth...)
	s.mu.Unlock()
	sort.SliceStable(t, func(i, j int) bool { return t[i].Seq < t[j].Seq })
	return t
}

// now is the engine clock: nanoseconds since NewServer (in Virtual mode, never
// behind the last step's end).
func (s *Server) now() int64 {
	w := time.Since(s.start).Nanoseconds()
	if s.o.Virtual {
		return max(w, s.vclock.Load())
	}
	return w
}

// submit hands requests to the engine goroutine.
func (s *Server) submit(rs ...*request) {
	s.mu.Lock()
	s.pending = append(s.pending, rs...)
	s.mu.Unlock()
	s.poke()
}

func (s *Server) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// abort tells the engine that r's client went away.
func (s *Server) abort(r *request, status string) {
	if r.done.Load() || r.abort.Load() {
		return
	}
	r.abortStatus = status
	r.abort.Store(true)
	s.aborts.Add(1)
	s.poke()
}

// loop is the engine goroutine: take new requests, plan a step, wait for its
// modelled end, publish its tokens, repeat.
func (s *Server) loop() {
	defer close(s.loopDone)
	e := s.eng
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var lastEnd int64
	var batch, pulled []*request
	for {
		s.mu.Lock()
		batch, s.pending = s.pending, batch[:0]
		pulled, s.pulled = s.pulled, pulled[:0]
		s.mu.Unlock()
		now := s.now()
		if s.o.Virtual && !e.idle() {
			// Busy: the virtual clock moves only by modelled step times.
			now = lastEnd
		}
		for i, r := range batch {
			if s.o.Virtual {
				r.arrival = now
			}
			e.add(r)
			batch[i] = nil
		}
		for i, r := range pulled {
			e.kvArrived(r, max(now, lastEnd))
			pulled[i] = nil
		}
		if len(batch) > 0 || len(pulled) > 0 {
			s.st.mu.Lock()
			s.st.waiting = e.numWaiting()
			s.st.mu.Unlock()
		}
		if s.aborts.Swap(0) > 0 {
			e.aborts = 1
			e.reapAborts(now)
		}
		if e.idle() {
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			}
		}
		start := max(now, lastEnd)
		d, ok := e.plan(start)
		if !ok {
			// Nothing fits right now (should not happen: MaxModelLen fits the cache).
			timer.Reset(time.Millisecond)
			select {
			case <-s.wake:
				timer.Stop()
			case <-timer.C:
			case <-s.stop:
				return
			}
			continue
		}
		end := start + int64(d)
		if s.o.Virtual {
			s.vclock.Store(end)
		} else {
			if wait := end - s.now(); wait > 0 {
				timer.Reset(time.Duration(wait))
				select {
				case <-timer.C:
				case <-s.stop:
					timer.Stop()
					return
				}
			}
			// A late step (CPU busy, timer slack) ends when it really ends,
			// so the truth matches what clients see.
			end = max(end, s.now())
		}
		e.commit(end)
		lastEnd = end
		if s.o.Virtual && !s.waitAcks(timer) {
			return
		}
		select {
		case <-s.stop:
			return
		default:
		}
	}
}

// lockstepTimeout bounds how long the Virtual engine waits for a stream to
// write a step's tokens (a stuck client must not stop the engine).
const lockstepTimeout = 5 * time.Second

// waitAcks blocks (Virtual mode) until every stream wrote what the last step
// published, so chunk boundaries are the engine's and not the scheduler's.
// It returns false when the server stops.
func (s *Server) waitAcks(timer *time.Timer) bool {
	if s.outstanding.Load() <= 0 {
		return true
	}
	timer.Reset(lockstepTimeout)
	defer timer.Stop()
	for s.outstanding.Load() > 0 {
		select {
		case <-s.ackCh:
		case <-timer.C:
			s.lockstepTimeouts.Add(1)
			return true
		case <-s.stop:
			return false
		}
	}
	return true
}

// ack tells the Virtual engine that r's handler wrote everything published.
func (s *Server) ack(r *request) {
	if r.ackPending.CompareAndSwap(true, false) {
		if s.outstanding.Add(-1) <= 0 {
			select {
			case s.ackCh <- struct{}{}:
			default:
			}
		}
	}
}

// record adds a truth row for a request refused before the engine.
func (s *Server) record(t traces.Record) {
	s.mu.Lock()
	s.truth = append(s.truth, t)
	s.mu.Unlock()
}

// newID returns a generated request id (32 hex digits, like vLLM's random_uuid).
func (s *Server) newID() string {
	n := s.ids.Add(1)
	a := mix64(uint64(s.o.Seed)*0x9E3779B97F4A7C15 + n)
	return fmt.Sprintf("%016x%016x", a, mix64(a))
}
