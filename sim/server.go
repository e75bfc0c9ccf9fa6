package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokentrace/tokentrace/internal/closeonce"
	"github.com/tokentrace/tokentrace/sim/engine"
	"github.com/tokentrace/tokentrace/traces"
)

// maxBodyBytes bounds a request body, as the engine's endpoint does.
const maxBodyBytes = 64 << 20

// Server is the simulator serving: one OpenAI-compatible endpoint (a
// fleet's router) in front of a simulated engine per replica (one engine
// for plain options).
type Server struct {
	// URL is the endpoint, http://127.0.0.1:PORT.
	URL string

	o     Options
	l     *layout
	reps  []*engine.Server
	start time.Time
	link  *rtLink

	mu     sync.Mutex // the router's state and routes
	routes map[string]served
	seq    int64
	ids    atomic.Uint64

	mux     *http.ServeMux
	httpSrv *http.Server
	stop    chan struct{}
	closer  closeonce.Closer
}

// served is what the router did with one request.
type served struct {
	seq int64
	route
}

// Start serves the fleet o describes (or plain options' one engine)
// behind one endpoint on o.Listen until Close or until ctx is done. Every
// replica runs its own engine in real time; with o.Virtual each keeps its
// own virtual clock, which a disaggregated fleet cannot (its pools hand
// requests to each other: use Simulate).
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Virtual && o.Disaggregated() {
		return nil, traces.OptionErrorf("fleet", "Options.Virtual", "a disaggregated fleet's pools share one clock in real time; simulate it offline (Simulate) instead")
	}
	s := &Server{o: o, start: time.Now(), routes: map[string]served{}, stop: make(chan struct{})}
	l, err := newLayout(o, func(i int) int { return s.reps[i].Meter().Counters().Waiting })
	if err != nil {
		return nil, err
	}
	s.l = l
	if o.Disaggregated() {
		f := o.Fleet
		s.link = newRTLink(newLink(f.KVTransferLatency, f.KVTransferPerToken, f.KVTransferBandwidth, f.KVTransferBytesPerToken), s.start)
	}
	for _, r := range l.reps {
		ro := r.spec.Options
		ro.TruthOut = ""
		if r.spec.Role == RoleDecode {
			ro.KVPull = s.link
		}
		srv, err := engine.NewServer(ctx, ro)
		if err != nil {
			s.shutdown()
			return nil, fmt.Errorf("fleet: replica %s: %w", r.spec.Name, err)
		}
		s.reps = append(s.reps, srv)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		s.shutdown()
		return nil, fmt.Errorf("fleet: listen %s: %w", o.Listen, err)
	}
	s.URL = "http://" + ln.Addr().String()
	s.routesInit()
	s.httpSrv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	go s.httpSrv.Serve(ln)
	if s.link != nil {
		go s.link.run()
	}
	s.closer.Watch(ctx, s.stopAndWrite)
	return s, nil
}

// Handler is the fleet's endpoint.
func (s *Server) Handler() http.Handler { return s.mux }

// Replicas names the fleet's replicas (one "" for plain options).
func (s *Server) Replicas() []string {
	var n []string
	for _, r := range s.l.reps {
		n = append(n, r.spec.Name)
	}
	return n
}

func (s *Server) routesInit() {
	s.mux = http.NewServeMux()
	gen := func(api string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				s.reps[0].Handler().ServeHTTP(w, r) // the engine's 405
				return
			}
			s.serveGen(w, r, api)
		}
	}
	s.mux.HandleFunc("/v1/completions", gen(traces.APICompletions))
	s.mux.HandleFunc("/v1/chat/completions", gen(traces.APIChat))
	s.mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.WriteMetrics(w)
	})
	// Each replica's own endpoints, as a per-pod scrape would see them:
	// /replicas/NAME/metrics and the like.
	s.mux.HandleFunc("/replicas/", func(w http.ResponseWriter, r *http.Request) {
		name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/replicas/"), "/")
		i := slices.IndexFunc(s.l.reps, func(x replica) bool { return x.spec.Name == name })
		if i < 0 || s.l.plain || r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + rest
		s.reps[i].Handler().ServeHTTP(w, r2)
	})
	// The rest (/health, /v1/models, /version, /tokenize): any replica
	// answers as all would.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.reps[0].Handler().ServeHTTP(w, r) })
}

// WriteMetrics writes the fleet's /metrics: every replica's vLLM families
// with pod and role labels, then the router's.
func (s *Server) WriteMetrics(w io.Writer) error {
	if err := engine.WriteMetrics(w, s.o.Model, s.l.metricsSources(func(i int) engine.Meter { return s.reps[i].Meter() })); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.writeRouterMetrics(w, func() (int, float64) {
		if s.link == nil {
			return 0, 0
		}
		return s.link.stats()
	})
}

// serveGen routes a generation request and hands it to its replica(s).
func (s *Server) serveGen(w http.ResponseWriter, r *http.Request, api string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return // client gone
	}
	if s.l.plain {
		s.forward(w, r, 0, body, "")
		return
	}
	rid := r.Header.Get("X-Request-Id")
	if rid == "" {
		rid = fmt.Sprintf("fleet-%016x", s.ids.Add(1))
	}
	var hashes []uint64
	if s.l.pool.policy.prefix {
		hashes = engine.PromptHashes(api, body, s.o.BlockSize)
	}
	var session int64
	if v := r.Header.Get(traces.SessionHeader); v != "" {
		session = int64(strHash(v)>>1) | 1
	}
	s.mu.Lock()
	rt := s.l.route(hashes, session, time.Since(s.start).Nanoseconds())
	s.routes[rid] = served{seq: s.seq, route: rt}
	s.seq++
	s.mu.Unlock()
	h := w.Header()
	h.Set(traces.ReplicaHeader, s.l.reps[rt.rep].spec.Name)
	h.Set(traces.RouteReasonHeader, rt.reason)
	if rt.pre >= 0 {
		h.Set(traces.PrefillReplicaHeader, s.l.reps[rt.pre].spec.Name)
		ok := s.prefill(w, r, rt.pre, body, rid)
		s.mu.Lock()
		s.l.reps[rt.pre].member.outstanding--
		s.mu.Unlock()
		if !ok {
			s.mu.Lock()
			s.l.reps[rt.rep].member.outstanding--
			s.mu.Unlock()
			return
		}
		body = withKVParams(body, map[string]any{"do_remote_prefill": true, "remote_engine_id": s.l.reps[rt.pre].spec.Name})
	}
	s.forward(w, r, rt.rep, body, rid)
	s.mu.Lock()
	s.l.reps[rt.rep].member.outstanding--
	s.mu.Unlock()
}

// forward serves the request on replica i with body.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, i int, body []byte, rid string) {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	if rid != "" {
		r2.Header.Set("X-Request-Id", rid)
	}
	s.reps[i].Handler().ServeHTTP(w, r2)
}

// prefill runs the prefill side on replica i: the request with one output
// token, not streamed (what llm-d's routing sidecar sends the prefill
// pod). On failure the prefill replica's answer goes to the client and it
// returns false.
func (s *Server) prefill(w http.ResponseWriter, r *http.Request, i int, body []byte, rid string) bool {
	pb, ok := prefillBody(body)
	if !ok {
		return true // not JSON: the decode replica will say so
	}
	rec := &recorder{h: http.Header{}}
	s.forward(rec, r, i, pb, rid)
	if r.Context().Err() != nil {
		return false // the client went away during the prefill
	}
	if rec.status == 0 || rec.status == http.StatusOK {
		return true
	}
	for k, v := range rec.h {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
	return false
}

// prefillBody is body with max_tokens 1, no streaming and
// kv_transfer_params.do_remote_decode.
func prefillBody(body []byte) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return nil, false
	}
	one := json.RawMessage("1")
	m["max_tokens"] = one
	if _, ok := m["max_completion_tokens"]; ok {
		m["max_completion_tokens"] = one
	}
	m["stream"] = json.RawMessage("false")
	delete(m, "stream_options")
	delete(m, "min_tokens")
	m["kv_transfer_params"] = json.RawMessage(`{"do_remote_decode":true}`)
	b, err := json.Marshal(m)
	return b, err == nil
}

// withKVParams sets body's kv_transfer_params (body unchanged when it is
// not a JSON object).
func withKVParams(body []byte, p map[string]any) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return body
	}
	pb, _ := json.Marshal(p)
	m["kv_transfer_params"] = pb
	b, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return b
}

// recorder keeps a non-streamed response.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

// Truth returns one row per request the fleet served, ordered by arrival
// (Seq): the serving replica's row with the fleet's columns, offsets from
// the fleet's start; under disaggregation merged with the prefill
// replica's row as Simulate does, the hop between the pools counted as
// decode queue.
func (s *Server) Truth() []traces.Record {
	s.mu.Lock()
	routes := make(map[string]served, len(s.routes))
	for k, v := range s.routes {
		routes[k] = v
	}
	s.mu.Unlock()
	type row struct {
		t   traces.Record
		rep int
	}
	var serving []row
	prefilled := map[string]traces.Record{}
	for i, srv := range s.reps {
		shift := srv.StartTime().Sub(s.start).Nanoseconds()
		for _, t := range srv.Truth() {
			for _, p := range []*int64{&t.ArrivalNs, &t.FirstTokenNs, &t.LastTokenNs} {
				if *p >= 0 {
					*p += shift
				}
			}
			if s.l.reps[i].spec.Role == RolePrefill {
				prefilled[t.RequestID] = t
				continue
			}
			serving = append(serving, row{t, i})
		}
	}
	if s.l.plain {
		out := make([]traces.Record, len(serving))
		for i := range serving {
			out[i] = serving[i].t
		}
		slices.SortStableFunc(out, func(a, b traces.Record) int { return int(a.Seq - b.Seq) })
		return out
	}
	lookup := func(id string) (served, bool) {
		if sv, ok := routes[id]; ok {
			return sv, true
		}
		// A prompt of a multi-prompt completion: RID-N.
		if i := strings.LastIndexByte(id, '-'); i > 0 {
			sv, ok := routes[id[:i]]
			return sv, ok
		}
		return served{}, false
	}
	var out []traces.Record
	for _, r := range serving {
		t := r.t
		sv, ok := lookup(t.RequestID)
		if ok {
			t.Seq, t.RouteReason = sv.seq, sv.reason
		}
		t.Replica = s.l.reps[r.rep].spec.Name
		if p, ok := prefilled[t.RequestID]; ok && sv.pre >= 0 {
			delete(prefilled, t.RequestID)
			t.PrefillReplica = s.l.reps[sv.pre].spec.Name
			hop := int64(0)
			if p.FirstTokenNs >= 0 {
				hop = max(t.ArrivalNs-p.FirstTokenNs, 0)
			}
			t.ArrivalNs = p.ArrivalNs
			t.ServerQueueNs = p.ServerQueueNs
			if p.ServerPrefillNs >= 0 && t.ServerPrefillNs >= 0 {
				t.ServerPrefillNs += p.ServerPrefillNs
			}
			if t.ServerDecodeQueueNs >= 0 {
				t.ServerDecodeQueueNs += hop
			}
			t.ServerCachedTokens = p.ServerCachedTokens
			if p.ServerPreemptions >= 0 && t.ServerPreemptions >= 0 {
				t.ServerPreemptions += p.ServerPreemptions
			}
		}
		out = append(out, t)
	}
	// Requests that ended on their prefill replica (refused, or the client
	// went away before the decode side).
	for id, p := range prefilled {
		if sv, ok := lookup(id); ok {
			p.Seq, p.RouteReason = sv.seq, sv.reason
			p.Replica, p.PrefillReplica = s.l.reps[sv.rep].spec.Name, s.l.reps[sv.pre].spec.Name
		}
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b traces.Record) int {
		if a.Seq != b.Seq {
			return int(a.Seq - b.Seq)
		}
		return strings.Compare(a.RequestID, b.RequestID)
	})
	return out
}

// Close stops the endpoint and every replica and writes o.TruthOut. It is
// idempotent and returns the same error every time.
func (s *Server) Close() error { return s.closer.Close(s.stopAndWrite) }

// stopAndWrite stops the endpoint and the replicas and writes o.TruthOut
// (once: on Close, or when Start's ctx ends).
func (s *Server) stopAndWrite() error {
	close(s.stop)
	if s.httpSrv != nil {
		s.httpSrv.Close()
	}
	err := s.shutdown()
	if s.o.TruthOut != "" {
		m := engine.TruthMeta(s.o.Options)
		if !s.l.plain {
			m.Set("sim.fleet", strings.Join(s.Replicas(), ","))
			m.Set("sim.router", s.o.Fleet.Router)
		}
		if werr := traces.WriteAll(s.o.TruthOut, m, s.Truth()); werr != nil {
			err = errors.Join(err, fmt.Errorf("fleet: write truth %s: %w", s.o.TruthOut, werr))
		}
	}
	return err
}

func (s *Server) shutdown() error {
	var errs []error
	for _, r := range s.reps {
		errs = append(errs, r.Close())
	}
	if s.link != nil {
		s.link.close()
	}
	return errors.Join(errs...)
}

// strHash is FNV-1a.
func strHash(v string) uint64 {
	h := fnv.New64a()
	io.WriteString(h, v)
	return h.Sum64()
}

// rtLink runs the KV link in real time for the decode replicas
// (engine.KVPuller): its clock is the wall clock since the fleet started.
type rtLink struct {
	mu    sync.Mutex
	l     *link
	start time.Time
	wake  chan struct{}
	stop  chan struct{}
	once  sync.Once
}

func newRTLink(l *link, start time.Time) *rtLink {
	return &rtLink{l: l, start: start, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Pull starts a pull now; done is called once it arrived.
func (r *rtLink) Pull(tokens int, done func()) {
	r.mu.Lock()
	now := time.Since(r.start).Nanoseconds()
	// Pulls that arrived since the link last ran end first: the new one
	// shares the link with those still moving.
	arrived := r.l.advance(now)
	var due []func()
	for _, tag := range arrived {
		due = append(due, tag.(func()))
	}
	r.l.start(now, tokens, done)
	r.mu.Unlock()
	for _, f := range due {
		f()
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *rtLink) stats() (int, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.l.inflight, r.l.totalTokens
}

func (r *rtLink) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []func()
	for {
		r.mu.Lock()
		for _, tag := range r.l.advance(time.Since(r.start).Nanoseconds()) {
			due = append(due, tag.(func()))
		}
		next := r.l.next()
		r.mu.Unlock()
		for i, f := range due {
			f()
			due[i] = nil
		}
		due = due[:0]
		wait := time.Hour
		if next >= 0 {
			wait = max(time.Duration(next-time.Since(r.start).Nanoseconds()), 0)
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-r.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-r.stop:
			return
		}
	}
}

func (r *rtLink) close() { r.once.Do(func() { close(r.stop) }) }

var _ engine.KVPuller = (*rtLink)(nil)
