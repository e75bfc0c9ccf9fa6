// Package capture turns serving logs (OpenAI-style gateway JSON lines,
// LiteLLM standard logging payloads, vLLM request logs, OTLP JSON span
// exports) into a content-free trace of traces.Records.
//
// Nothing a person wrote leaves capture: out go token counts, time offsets,
// model names and keyed hashes (HMAC-SHA256 with the operator's key) that are
// renumbered in order of first appearance. Prefix categories and prefix
// blocks shared by fewer than MinCategorySize requests are dropped. Problems
// are reported by kind and line number, never with content.
package capture

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/fserr"
	"github.com/tokentrace/tokentrace/traces"
)

// Formats lists the accepted values of Options.Format.
var Formats = []string{FormatAuto, FormatOpenAI, FormatLiteLLM, FormatVLLM, FormatOTLP}

// Log formats.
const (
	FormatAuto    = "auto"
	FormatOpenAI  = "openai-jsonl"
	FormatLiteLLM = "litellm"
	FormatVLLM    = "vllm-log"
	FormatOTLP    = "otlp-json"
)

// Session modes of Options.Sessions.
const (
	SessionsAuto  = "auto"  // session/user field (else a trace id) when present, else chat structure
	SessionsField = "field" // only the session/user field (else a trace id)
	SessionsChat  = "chat"  // only chat structure
	SessionsNone  = "none"  // every request single-shot
)

// Defaults shared by the CLI flags and the library.
const (
	DefaultFormat          = FormatAuto
	DefaultTokenizer       = "o200k_base"
	DefaultMinCategorySize = 5
	DefaultBlockSize       = 512
	DefaultSessions        = SessionsAuto
	DefaultMaxLineBytes    = 16 << 20
	DefaultSortMemoryBytes = 64 << 20
	DefaultSessionIdle     = time.Hour
	DefaultMaxKAnonEntries = 2 << 20
	// PartSeqBits is the number of low seq bits that number the requests
	// of one part (Options.Part); the part index sits above them.
	PartSeqBits = 40
	// MaxPartIndex is the largest Options.PartIndex.
	MaxPartIndex = 1<<(62-PartSeqBits) - 1
	// RunLabel is the Record.Run of captured rows that carry outcomes.
	RunLabel = "production"
)

// Options configures a capture. Start from DefaultOptions: a field's zero
// is a value of its own, never its default.
type Options struct {
	// Format is the log format, one of Formats; "auto" sniffs each input's
	// first bytes. Defaults to "auto".
	Format string
	// Fields remaps openai-jsonl field names to dotted JSON paths, e.g.
	// {"time": "ts", "request": "body.req"}. Names: time, request, response,
	// session, user, status, ttft_ms, latency_ms, end_time (when the
	// response ended: finish_ns when latency_ms is absent), trace_id (a
	// session when session and user are absent), call_id and
	// parent_call_id (parent_seq: the call whose call_id, in the same trace,
	// is this one's parent_call_id). Defaults to nil (none).
	Fields map[string]string
	// Tokenizer is the tiktoken encoding used where the logs carry neither
	// usage numbers nor token ids (and for prefix lengths and blocks).
	// Defaults to "o200k_base".
	Tokenizer string
	// MinCategorySize is k: prefix categories and prefix blocks shared by
	// fewer requests are dropped. Defaults to 5.
	MinCategorySize int
	// BlockSize is the token size of a prefix block; 0 turns prefix_blocks
	// off. Defaults to 512.
	BlockSize int
	// Key is the HMAC key. Empty means an ephemeral random key that is never
	// saved (hashes are then comparable only within this capture). Defaults
	// to nil.
	Key []byte
	// KeepStart keeps the absolute start time at full precision instead of
	// truncating it to the hour. Defaults to false.
	KeepStart bool
	// KeepHashes writes hex HMAC digests as category labels and digest
	// prefixes as block ids instead of renumbered ids. Defaults to false.
	KeepHashes bool
	// Year is the year of vllm-log timestamps, which have none; 0 is the
	// current UTC year. Defaults to 0.
	Year int
	// Sessions chooses how sessions are found: auto, field, chat or none.
	// A trace id (OTLP, LiteLLM and openai-jsonl trace_id) counts as a
	// field after session and user ids. Parent links are kept only within a session, so
	// chat and none drop them.
	// Defaults to "auto".
	Sessions string
	// Strict fails on the first malformed line instead of counting it.
	// Defaults to false.
	Strict bool
	// MaxLineBytes bounds one log line; longer lines are skipped and counted.
	// Defaults to 16 MiB.
	MaxLineBytes int
	// Workers is the number of goroutines parsing openai-jsonl, litellm and
	// otlp-json lines (vllm-log is read by one); the output does not depend
	// on it; 0 is GOMAXPROCS. Defaults to 0.
	Workers int
	// SortMemoryBytes bounds the redacted requests held in memory to sort
	// them by arrival (about 300 bytes each); beyond it sorted runs are
	// spilled to TempDir and merged. The output does not depend on it.
	// Defaults to DefaultSortMemoryBytes (64 MiB).
	SortMemoryBytes int64
	// TempDir is where sorted runs are spilled, in a directory of their own
	// that is removed when the capture ends, fails or is cancelled; "" is
	// os.TempDir(). Defaults to "".
	TempDir string
	// SessionIdle is how long a session waits for its next request: a
	// session (a session or user field, or a chat conversation) idle for
	// longer has ended, and a later request with the same field or
	// extending the same conversation starts a new one. It bounds what the
	// sessions stage remembers to the sessions of this window. Defaults to
	// 1h.
	SessionIdle time.Duration
	// MaxKAnonEntries bounds the categories and prefix blocks whose counts
	// the k rule keeps (about 30 bytes each). When full, those seen once are
	// forgotten; one seen again counts anew, so the bound can only drop a
	// category or block, never keep one shared by fewer than k. Defaults to
	// DefaultMaxKAnonEntries (2 Mi entries).
	MaxKAnonEntries int
	// Part makes this capture one part of a trace captured in several
	// (one process per input shard, e.g. a Kubernetes Indexed Job). A part
	// is not a finished trace: k-anonymity is deferred (every category and
	// block is written as its keyed digest, the metadata says
	// capture.kanon=deferred, and readers refuse it) until Compose reads all
	// the parts and applies it where every request is seen. Session ids are
	// keyed 63-bit digests of the session key (the session or user field,
	// or a chat's system and first user message), the same in every part;
	// Compose splits them at SessionIdle and numbers the turns. Arrivals
	// are Unix ns and seq carries PartIndex in its top bits, so that parts
	// never collide. Requires Key. Defaults to false.
	Part bool
	// PartIndex is this part's index, 0 to MaxPartIndex (seq =
	// PartIndex<<PartSeqBits | the request's number in the part).
	// Defaults to 0.
	PartIndex int
	// Progress, when set, is called about every ProgressEvery while a
	// capture runs (on the capture's goroutine). Defaults to nil (none).
	Progress func(Progress)
}

// Progress says how far a capture is.
type Progress struct {
	// Phase is "reading" (parse and redact) or "writing" (the sessions
	// and records passes).
	Phase string
	// Lines and Requests read so far; Written records so far of Requests.
	Lines, Requests, Written int64
	Elapsed                  time.Duration
}

// ProgressEvery is how often Options.Progress is called.
const ProgressEvery = 10 * time.Second

// progressEvery is ProgressEvery; tests shorten it.
var progressEvery = ProgressEvery

func (o *Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// DefaultOptions returns every option's default, the values the field docs
// name.
func DefaultOptions() Options {
	return Options{
		Format:          DefaultFormat,
		Tokenizer:       DefaultTokenizer,
		MinCategorySize: DefaultMinCategorySize,
		BlockSize:       DefaultBlockSize,
		Sessions:        DefaultSessions,
		MaxLineBytes:    DefaultMaxLineBytes,
		Workers:         0,
		SortMemoryBytes: DefaultSortMemoryBytes,
		SessionIdle:     DefaultSessionIdle,
		MaxKAnonEntries: DefaultMaxKAnonEntries,
	}
}

func (o *Options) year() int {
	if o.Year > 0 {
		return o.Year
	}
	return time.Now().UTC().Year()
}

// optionErr is capture's option error: option is a field of Options or
// ComposeOptions ("Options.Format"), value the value as given (quoted if a
// string; none when nil).
func optionErr(option string, value any, want string) error {
	if value == nil {
		return traces.OptionErrorf("capture", option, "%s", want)
	}
	v := fmt.Sprint(value)
	if s, ok := value.(string); ok {
		v = strconv.Quote(s)
	}
	return traces.OptionErrorf("capture", option, "%s: %s", v, want)
}

// Validate checks o as given (a zero is a value like any other, never the
// default); an error is a *traces.OptionError naming the option.
func (o *Options) Validate() error {
	bad := func(option string, value any, want string) error { return optionErr("Options."+option, value, want) }
	if !slices.Contains(Formats, o.Format) {
		return bad("Format", o.Format, "want one of "+strings.Join(Formats, ", "))
	}
	if !validTokenizer(o.Tokenizer) {
		return bad("Tokenizer", o.Tokenizer, "want one of "+strings.Join(Tokenizers, ", "))
	}
	if o.MinCategorySize < 1 {
		return bad("MinCategorySize", o.MinCategorySize, "want at least 1")
	}
	if o.BlockSize < 0 {
		return bad("BlockSize", o.BlockSize, "want 0 (off) or more")
	}
	if !slices.Contains([]string{SessionsAuto, SessionsField, SessionsChat, SessionsNone}, o.Sessions) {
		return bad("Sessions", o.Sessions, "want auto, field, chat or none")
	}
	if o.MaxLineBytes < 1024 {
		return bad("MaxLineBytes", o.MaxLineBytes, "want at least 1024")
	}
	if len(o.Key) > 0 && len(o.Key) < 16 {
		return bad("Key", nil, "key too short (want at least 16 bytes)")
	}
	for name := range o.Fields {
		if !slices.Contains(fieldNames, name) {
			return bad("Fields", name, "unknown name (want one of "+strings.Join(fieldNames, ", ")+")")
		}
	}
	if o.Workers < 0 {
		return bad("Workers", o.Workers, "want 0 (all cores) or more")
	}
	if o.SortMemoryBytes < 1 {
		return bad("SortMemoryBytes", o.SortMemoryBytes, "want at least 1 byte")
	}
	if o.MaxKAnonEntries < 1 {
		return bad("MaxKAnonEntries", o.MaxKAnonEntries, "want at least 1 entry")
	}
	if o.SessionIdle <= 0 {
		return bad("SessionIdle", o.SessionIdle, "want a positive duration")
	}
	if o.Part && len(o.Key) == 0 {
		return bad("Key", nil, "a part (Part) needs the capture key shared by every part")
	}
	if o.PartIndex < 0 || o.PartIndex > MaxPartIndex {
		return bad("PartIndex", o.PartIndex, "want 0 to "+strconv.Itoa(MaxPartIndex))
	}
	if o.Year < 0 || o.Year > 9999 {
		return bad("Year", o.Year, "out of range")
	}
	return nil
}

// Input is one log stream. R is read once; if it is an io.Closer Capture
// does not close it (the caller owns it).
type Input struct {
	// Name appears in problems and errors ("-" for stdin).
	Name string
	R    io.Reader
}

// Problem kinds, reported per kind with the first line number.
const (
	KindBadJSON    = "bad_json"        // not a JSON object
	KindTooLong    = "line_too_long"   // longer than MaxLineBytes
	KindNotUTF8    = "not_utf8"        // invalid UTF-8 bytes
	KindMissing    = "missing_field"   // a required field is absent
	KindBadValue   = "bad_value"       // a field has the wrong type or range
	KindTruncated  = "truncated_input" // the stream ended early (damaged gzip/zstd, I/O error)
	KindNoPrompt   = "no_prompt"       // vllm-log request with no prompt or token ids logged
	KindUnmatched  = "unmatched"       // vllm-log output line with no request line
	KindBadLogLine = "bad_log_line"    // vllm-log request line that does not parse
)

var kindText = map[string]string{
	KindBadJSON:    "malformed JSON",
	KindTooLong:    "line too long",
	KindNotUTF8:    "invalid UTF-8",
	KindMissing:    "missing field",
	KindBadValue:   "field has a bad value",
	KindTruncated:  "input ends early (damaged or truncated)",
	KindNoPrompt:   "request logged without prompt or token ids (vLLM logs them at its DEBUG log level)",
	KindUnmatched:  "output line without a request line",
	KindBadLogLine: "request log line does not parse",
}

// LineError is a malformed line: it names the input and the line, and a
// kind, never content.
type LineError struct {
	File string
	Line int64
	Kind string
	// Field names the field for KindMissing/KindBadValue ("" otherwise).
	Field string
}

func (e *LineError) Error() string {
	msg := kindText[e.Kind]
	if e.Field != "" {
		msg += " " + e.Field
	}
	return fmt.Sprintf("%s:%d: %s (%s)", e.File, e.Line, msg, e.Kind)
}

// Problem counts the malformed lines of one kind.
type Problem struct {
	Kind  string
	Count int64
	// First is the first occurrence.
	First LineError
}

// Stats says what a capture read and skipped.
type Stats struct {
	Inputs   int
	Bytes    int64 // decompressed bytes read
	Lines    int64
	Requests int64 // records produced
	// Ignored counts lines that are not requests (other vLLM log lines,
	// non-llm_request spans). They are not problems.
	Ignored int64
	// Problems is per kind, sorted by kind.
	Problems []Problem
	// TokensFrom counts requests per input-token source ("usage",
	// "token_ids" or a tokenizer name).
	TokensFrom map[string]int64
	// Categories kept and dropped by the k rule; Sessions found.
	Categories, CategoriesDropped, Sessions int
	// ParentLinks counts the calls whose parent_seq names the call that
	// spawned them (OTLP spans whose parent or ancestor span is another
	// captured llm_request span, openai-jsonl parent_call_id). ParentsDropped counts the calls whose
	// logged parent was not found among the captured calls of the same
	// session within SessionIdle before them: a span of another kind
	// exported on another line (the usual case for a call whose parent is
	// an agent's span, not another call), a call not captured, or one in
	// another session. A dropped link is never an error, Strict or not: the
	// call is written without parent_seq.
	ParentLinks, ParentsDropped int64
	// KAnonForgotten counts the categories and blocks seen once that the
	// k-anonymity stage forgot when it reached Options.MaxKAnonEntries.
	KAnonForgotten int64
	// Overlaps lists the inputs whose requests overlap in time (rotated
	// logs normally do not). Every input is merged by arrival, so
	// overlapping inputs interleave; a request logged in both counts twice.
	Overlaps []Overlap
}

// Overlap is two inputs whose arrival spans overlap.
type Overlap struct {
	A, B string
	// Ns is the length of the overlap.
	Ns int64
}

// Malformed is the total number of malformed lines.
func (s Stats) Malformed() int64 {
	var n int64
	for _, p := range s.Problems {
		n += p.Count
	}
	return n
}

// Result is a capture's output.
type Result struct {
	Records []traces.Record
	Meta    traces.Meta
	Stats   Stats
}

// Capture reads every input and returns the redacted records, sorted by
// arrival. Malformed lines are counted in Stats (or, with Strict, the first
// one is returned as a *LineError). It holds every record: use Run to
// stream them to a file.
func Capture(ctx context.Context, o Options, inputs []Input) (*Result, error) {
	pl, err := start(ctx, o, inputs)
	if err != nil {
		return nil, err
	}
	defer pl.close()
	res := &Result{Meta: pl.meta(), Records: make([]traces.Record, 0, pl.requests())}
	for r, err := range pl.records() {
		if err != nil {
			return nil, err
		}
		res.Records = append(res.Records, r)
	}
	res.Stats = pl.stats
	return res, nil
}

// Run captures the named files ("-" = stdin) and writes the records to the
// writer create returns for the capture's metadata. command, when set, is
// recorded as Meta.Command. Memory does not grow with the number of
// requests (see Options.SortMemoryBytes and SessionIdle).
func Run(ctx context.Context, o Options, names []string, stdin io.Reader, command string, create func(traces.Meta) (traces.Writer, error)) (Stats, error) {
	names, err := ExpandInputs(names)
	if err != nil {
		return Stats{}, err
	}
	var inputs []Input
	for _, n := range names {
		if n == "-" {
			inputs = append(inputs, Input{Name: "-", R: stdin})
			continue
		}
		f, err := os.Open(n)
		if err != nil {
			return Stats{}, fserr.Wrap("open log", n, err)
		}
		defer f.Close()
		inputs = append(inputs, Input{Name: n, R: f})
	}
	pl, err := start(ctx, o, inputs)
	if err != nil {
		return Stats{}, err
	}
	defer pl.close()
	if pl.requests() == 0 {
		for range pl.records() { // for the stats
		}
		return pl.stats, noRequests(pl.stats, o.Format)
	}
	m := pl.meta()
	m.Command = command
	w, err := create(m)
	if err != nil {
		for range pl.records() { // for the stats
		}
		return pl.stats, err
	}
	// Records stream from the records stage to w; after a write error the
	// stream still runs to its end so that the stats are complete.
	batch := make([]traces.Record, 0, 4096)
	var werr error
	for r, err := range pl.records() {
		if err != nil {
			werr = cmp.Or(werr, err)
			break
		}
		if werr != nil {
			continue
		}
		if werr = ctx.Err(); werr != nil {
			break // interrupted: no need for complete stats
		}
		if batch = append(batch, r); len(batch) == cap(batch) {
			_, werr = w.Write(batch)
			batch = batch[:0]
		}
	}
	if werr == nil && len(batch) > 0 {
		_, werr = w.Write(batch)
	}
	if werr != nil {
		traces.Abort(w) // the output name never holds a partial trace
		return pl.stats, fmt.Errorf("write trace: %w", werr)
	}
	if err := w.Close(); err != nil {
		return pl.stats, fmt.Errorf("write trace: %w", err)
	}
	return pl.stats, nil
}

// ExpandInputs expands the glob patterns among names (a name that exists
// as a file is taken as it is), each pattern's matches in name order, so
// that rotated logs can be given as "gateway.log*". A pattern that matches
// nothing is an error.
func ExpandInputs(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		if n == "-" || !strings.ContainsAny(n, "*?[") {
			out = append(out, n)
			continue
		}
		if _, err := os.Stat(n); err == nil {
			out = append(out, n)
			continue
		}
		m, err := filepath.Glob(n)
		if err != nil {
			return nil, fmt.Errorf("log pattern %q: %w", n, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("log pattern %q: no file matches", n)
		}
		out = append(out, m...) // Glob sorts them
	}
	return out, nil
}

// ErrParquet is returned for an input that is a Parquet file (its magic
// bytes), not serving logs: a trace already, or another tool's Parquet.
var ErrParquet = errors.New("a Parquet file, not serving logs")

// ErrNoRequests is returned when the inputs hold no request: no trace is
// written, since an empty trace is never what was wanted.
var ErrNoRequests = errors.New("no requests captured")

// noRequests says why nothing was captured, as far as the stats tell.
func noRequests(s Stats, format string) error {
	switch {
	case s.Lines == 0:
		return fmt.Errorf("%w: the input is empty", ErrNoRequests)
	case s.Malformed() > 0:
		top := s.Problems[0]
		for _, p := range s.Problems {
			if p.Count > top.Count {
				top = p
			}
		}
		return fmt.Errorf("%w: %d of %d lines are malformed for format %q (most: %s, first at %s:%d)",
			ErrNoRequests, s.Malformed(), s.Lines, format, top.Kind, top.First.File, top.First.Line)
	default:
		return fmt.Errorf("%w: none of the %d lines is a request in format %q", ErrNoRequests, s.Lines, format)
	}
}

// Key handling.

// ReadKeyFile reads a capture key: 64 hex characters (as NewKeyFile writes)
// or at least 16 raw bytes. Errors never contain key material.
func ReadKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fserr.Wrap("read key file", path, err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) == 64 {
		if k, err := hex.DecodeString(s); err == nil {
			return k, nil
		}
	}
	if len(s) < 16 {
		return nil, fmt.Errorf("read key file %s: key too short (want at least 16 bytes)", path)
	}
	return []byte(s), nil
}

// NewKeyFile generates a random 32-byte key and saves it (hex, mode 0600)
// at path, refusing to overwrite an existing file.
func NewKeyFile(path string) ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fserr.Wrap("create key file", path, err)
	}
	// A key file cut short (a full disk) would later load as a different
	// key: remove it rather than leave it.
	if _, err := f.WriteString(hex.EncodeToString(k) + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("write key file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("write key file: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("write key file: %w", err)
	}
	return k, nil
}

// Fingerprint identifies a key without revealing it: the first 16 hex
// characters of HMAC-SHA256(key, "tokentrace key fingerprint").
func Fingerprint(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("tokentrace key fingerprint"))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))[:16]
}

// EphemeralFingerprint is Meta.KeyFingerprint when no key was given.
const EphemeralFingerprint = "ephemeral"

// startString formats t truncated to the hour (or in full with keep).
func startString(t time.Time, keep bool) string {
	if keep {
		return t.UTC().Format(time.RFC3339Nano)
	}
	return t.UTC().Truncate(time.Hour).Format(time.RFC3339)
}
