package synth

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"github.com/tokentrace/tokentrace/internal/fserr"
	"github.com/tokentrace/tokentrace/traces"
)

// ModelFormat is the "format" field of every model file.
const ModelFormat = "tokentrace-synth-model"

// ModelVersion is the newest model file version this package reads and
// writes. Version 2 adds follow-up turns (Group.FollowUp and the think-time
// fields of Sessions); version 3 adds how follow-ups resend their blocks
// (Model.BlockK, FollowUp.DroppedBlocks, FreshKeptShare, FreshByContext,
// Resumes) and the sessions' starts per bin (Sessions.StartsPerBin). A
// model is written as the lowest version that holds it: one without
// sessions as version 1, byte for byte what earlier releases wrote; one
// with sessions is version 3 (its starts per bin). LoadModel reads
// versions 1 to ModelVersion and rejects any other with ErrModelVersion;
// an older model generates as it did.
const ModelVersion = 3

// modelVersionFollowUps is the version of a model with follow-up turns but
// no FollowUp.DroppedBlocks.
const modelVersionFollowUps = 2

// modelVersionNoFollowUps is the version of a model without follow-up turns.
const modelVersionNoFollowUps = 1

// ErrModelVersion is returned for a model file of another format version.
var ErrModelVersion = errors.New("unsupported synth model version")

// ErrBadModel is wrapped by every other model-file validation error.
var ErrBadModel = errors.New("invalid synth model")

// Model is a fitted workload: everything Generate needs, and nothing that
// identifies a single request. It is plain JSON (see README) holding
// histograms, shares, per-bin arrival counts and fitted parameters; no raw
// record is stored. Histograms keep at least FitOptions.MinBinCount values
// per bin and categories below FitOptions.MinCategoryRecords are pooled.
type Model struct {
	// Format is ModelFormat.
	Format string `json:"format"`
	// Version is ModelVersion.
	Version int `json:"version"`
	// FittedOn says what the model was fitted on.
	FittedOn FittedOn `json:"fitted_on"`
	// Fit are the options the model was fitted with.
	Fit FitOptions `json:"fit_options"`
	// SpanNs is the fitted trace's duration: last arrival plus one mean gap
	// (one quantum for quantized traces). Generate's default duration.
	SpanNs int64 `json:"span_ns"`
	// BinNs is the width of the arrival-rate bins.
	BinNs int64 `json:"bin_ns"`
	// QuantumNs is the arrival-time grid of a coarsened trace (Mooncake's
	// conversation trace puts arrivals on a 3 s grid), 0 if none. Generated
	// arrivals are put on the same grid.
	QuantumNs int64 `json:"quantum_ns"`
	// BlockSize is the tokens per PrefixBlocks entry (0 = no blocks).
	BlockSize int `json:"block_size,omitempty"`
	// BlockK is the fitted trace's k-anonymity threshold for prefix blocks
	// (its Meta.KThreshold, version 3; 0 = none): capture replaced every
	// block fewer than BlockK requests shared by an id of its own, so a
	// conversation's blocks survive only while enough later turns resend
	// them. Generate does the same to a session's blocks.
	BlockK int `json:"block_k,omitempty"`
	// Tokenizer is the fitted trace's Meta.Tokenizer.
	Tokenizer string `json:"tokenizer,omitempty"`
	// Classes are the traffic classes, by name.
	Classes []Class `json:"classes"`
}

// FittedOn describes the trace a model was fitted on.
type FittedOn struct {
	// Source is the trace's Meta.Source.
	Source string `json:"source,omitempty"`
	// File is the trace's file name as given to fit.
	File string `json:"file,omitempty"`
	// SchemaVersion is the trace's schema version.
	SchemaVersion string `json:"schema_version,omitempty"`
	// Records is the number of records fitted.
	Records int64 `json:"records"`
	// FirstArrivalNs and LastArrivalNs bound the fitted arrivals.
	FirstArrivalNs int64 `json:"first_arrival_ns"`
	LastArrivalNs  int64 `json:"last_arrival_ns"`
	// Sessions is the number of distinct non-zero sessions.
	Sessions int64 `json:"sessions"`
	// Categories is the number of distinct categories (before pooling).
	Categories int `json:"categories"`
	// Note is a reminder that no raw records are kept.
	Note string `json:"note"`
	// Approximations says where the streaming fitter, to bound its memory,
	// did not fit the records exactly (histograms cut from values truncated
	// to fewer significant bits, prefix blocks forgotten, categories pooled
	// unseen); absent when the model is exact.
	Approximations []string `json:"approximations,omitempty"`
}

// Share is a named share of records.
type Share struct {
	Name  string  `json:"name"`
	Count int64   `json:"count"`
	Share float64 `json:"share"`
}

// Class is one traffic class.
type Class struct {
	// Name is Record.Class.
	Name string `json:"name"`
	// Records is the class's record count.
	Records int64 `json:"records"`
	// Models and APIs are the shares of Record.Model and Record.API.
	Models []Share `json:"models"`
	APIs   []Share `json:"apis"`
	// Arrival is the arrival process of requests that start a session or
	// are single-shot.
	Arrival Arrival `json:"arrival"`
	// Sessions is the multi-turn structure (nil: no sessions).
	Sessions *Sessions `json:"sessions,omitempty"`
	// CategoriesFromBlocks says categories are derived from PrefixBlocks as
	// the Mooncake importer does ("prefix-<id>" of the last reused block);
	// Generate derives them the same way and Groups has one unnamed group.
	CategoriesFromBlocks bool `json:"categories_from_blocks,omitempty"`
	// SharedPrefixBlocks is the most common number of reused leading blocks
	// when at least 10% of rows reuse exactly that many (Mooncake: 1, the
	// shared system prompt), else 0. See Cond.DeepShare.
	SharedPrefixBlocks int `json:"shared_prefix_blocks,omitempty"`
	// Groups are the prefix categories with their length models.
	Groups []Group `json:"categories"`
}

// Arrival is a binned-rate arrival process.
type Arrival struct {
	// CountsPerBin are the arrivals per BinNs bin from time 0 (a partial
	// last bin is scaled to a full bin). Diurnal shape and bursts longer
	// than a bin survive here.
	CountsPerBin []float64 `json:"counts_per_bin"`
	// Levels are within-bin gap distributions by bin load: bins are ranked
	// by count and cut into up to FitOptions.GapLevels levels, each with the
	// distribution of gaps (seconds) between arrivals of the same bin. A
	// bin of n arrivals uses the first level whose MaxCount ≥ n.
	Levels []GapLevel `json:"gap_levels"`
}

// GapLevel is the gap distribution of bins with up to MaxCount arrivals.
type GapLevel struct {
	// MaxCount is the largest bin count of the level (the top level has
	// the largest float64: no upper bound).
	MaxCount float64 `json:"max_count"`
	// Gap is the distribution of gaps in seconds between clusters
	// (between arrivals, when no arrivals cluster).
	Gap GapModel `json:"gap_s"`
	// ClusterSizes is the distribution of arrivals per cluster: arrivals
	// closer than FitOptions.ClusterGap (a batch sent at once).
	ClusterSizes Hist `json:"cluster_size"`
	// IntraGapS is the distribution of gaps in seconds inside clusters.
	IntraGapS Hist `json:"intra_cluster_gap_s"`
	// CV is the coefficient of variation of all the level's gaps.
	CV float64 `json:"cv"`
	// Layout is how Generate fits a bin's drawn gaps to the bin: LayoutEven
	// stretches every gap by one factor (exact for a Poisson process given
	// its count; chosen when CV ≤ EvenLayoutMaxCV), LayoutClusters keeps
	// gaps inside clusters and stretches those between (bursty traffic,
	// keeps sharp modes such as a 100 ms client tick).
	Layout string `json:"layout"`
}

// Layouts of GapLevel.Layout.
const (
	LayoutEven     = "even"
	LayoutClusters = "clusters"
)

// EvenLayoutMaxCV is the largest gap CV of a level laid out evenly.
const EvenLayoutMaxCV = 1.25

// layoutFor is the Layout of a level whose gaps have coefficient of
// variation cv.
func layoutFor(cv float64) string {
	if cv > EvenLayoutMaxCV {
		return LayoutClusters
	}
	return LayoutEven
}

// GapModel is a gap distribution in seconds: the empirical histogram and
// maximum-likelihood fits of three families.
type GapModel struct {
	// Samples is the number of gaps fitted.
	Samples int64 `json:"samples"`
	// ZeroShare is the share of zero gaps (same-instant arrivals); the
	// parametric fits are on the positive gaps.
	ZeroShare float64 `json:"zero_share"`
	// Empirical is the histogram of the gaps (zeros included).
	Empirical Hist `json:"empirical"`
	// Fits are exponential, gamma and Weibull MLE fits on positive gaps.
	Fits []ParamFit `json:"fits"`
	// Best is the family with the highest log-likelihood.
	Best string `json:"best"`
}

// ParamFit is one fitted distribution family.
type ParamFit struct {
	// Family is "exponential", "gamma" or "weibull".
	Family string `json:"family"`
	// Params: exponential {rate}; gamma {shape, rate}; weibull {shape, scale}.
	Params map[string]float64 `json:"params"`
	// LogLikelihood is the total log-likelihood on the fitted gaps.
	LogLikelihood float64 `json:"log_likelihood"`
}

// Sessions is the multi-turn structure of a class.
type Sessions struct {
	// Share is the share of session starts that begin a multi-turn session
	// (the rest are single-shot).
	Share float64 `json:"share"`
	// Turns is the distribution of turns per session.
	Turns Hist `json:"turns"`
	// GapS is the distribution of seconds between consecutive turns.
	GapS Hist `json:"inter_turn_gap_s"`

	// The fields below are version 2 (absent in version 1, where Generate
	// draws follow-up turns' lengths like first turns). In both, a
	// follow-up's arrival_ns is the previous turn's plus a draw from GapS:
	// open-loop replay keeps the recorded spacing.

	// FollowUps is the number of follow-up turns (a session's rows after
	// its first); each category's are modelled in Group.FollowUp.
	FollowUps int64 `json:"follow_ups,omitempty"`
	// ThinkFrom says how the think times (Group.FollowUp.ThinkS) were
	// measured: ThinkFromRecorded (the row's think_ns), ThinkFromFinish
	// (arrival − the previous turn's finish_ns), ThinkFromArrivalGap
	// (arrival − the previous turn's arrival, which includes the previous
	// turn's service time: the trace has no finish_ns) or ThinkFromMixed;
	// the counts say how many follow-ups each source gave.
	ThinkFrom            string `json:"think_from,omitempty"`
	ThinkRecorded        int64  `json:"think_recorded,omitempty"`
	ThinkFromFinishCount int64  `json:"think_from_finish,omitempty"`
	ThinkFromGapCount    int64  `json:"think_from_arrival_gap,omitempty"`
	// StartsPerBin are the sessions' first rows per Arrival bin (version
	// 3): a trace's conversations need not start as its single-shot rows
	// do (a capture's last seconds hold conversations cut to one row,
	// which are single-shot rows, and no new sessions), so Generate makes
	// an arrival of a bin a session with the bin's share,
	// StartsPerBin / CountsPerBin, not Share.
	StartsPerBin []float64 `json:"starts_per_bin,omitempty"`
	// PooledFollowUp pools the follow-ups of categories with fewer than
	// FitOptions.MinCategoryRecords of them (so no histogram pins down a
	// few rows); Generate uses it for categories without a FollowUp of
	// their own. Its FirstInputTokens is empty.
	PooledFollowUp *FollowUp `json:"pooled_follow_up,omitempty"`
}

// Values of Sessions.ThinkFrom.
const (
	ThinkFromRecorded   = "think_ns"
	ThinkFromFinish     = "finish_ns"
	ThinkFromArrivalGap = "arrival_gap"
	ThinkFromMixed      = "mixed"
)

// FollowUp models a category's follow-up turns (version 2): a turn's input
// is the previous turn's input + its output + new tokens, as an agent or a
// chat resends its context.
type FollowUp struct {
	// Turns is the number of follow-up rows of the category.
	Turns int64 `json:"turns"`
	// FreshPrompts counts those whose input is shorter than the previous
	// turn's input + output (the context did not grow: a fresh prompt).
	FreshPrompts int64 `json:"fresh_prompts"`
	// FreshInputTokens is the distribution of the fresh prompts' input
	// lengths.
	FreshInputTokens Hist `json:"fresh_input_tokens"`
	// NewInputTokens is the distribution of input − previous input −
	// previous output of the others (the tokens a turn adds).
	NewInputTokens Hist `json:"new_input_tokens"`
	// OutputTokens is the distribution of the follow-ups' output lengths.
	OutputTokens Hist `json:"output_tokens"`
	// ThinkS is the distribution of think time in seconds before a
	// follow-up (see Sessions.ThinkFrom).
	ThinkS Hist `json:"think_s"`
	// TurnsPerSession is the distribution of turns (≥ 2) of the sessions
	// whose second turn is in the category.
	TurnsPerSession Hist `json:"turns_per_session"`
	// FirstInputTokens is the distribution of the input lengths of the
	// category's other rows (single-shot and first turns); Generate draws
	// those rows' input from it, not from Group.InputTokens (all rows).
	FirstInputTokens Hist `json:"first_input_tokens"`
	// DroppedBlocks is the distribution of how many of the previous turn's
	// full prefix blocks a growing turn does not reuse (a client trimming
	// its history; version 3; nil without blocks or with Model.BlockK,
	// whose rule accounts for what the turns drop). A version-3 model's
	// follow-ups never reuse the previous turn's trailing partial block
	// (the next prompt fills it with other tokens, so its hash differs); a
	// version-2 model's reuse the whole previous chain.
	DroppedBlocks *Hist `json:"dropped_blocks,omitempty"`
	// FreshKeptShare is the distribution of the share of a fresh prompt's
	// prefix blocks that are the previous turn's leading blocks (a client
	// compacting its history keeps the system prompt and tools; version 3;
	// nil without blocks). Without it a fresh prompt keeps its category's
	// prefix.
	FreshKeptShare *Hist `json:"fresh_kept_share,omitempty"`
	// FreshByContext models fresh prompts by the context they follow (the
	// input + output of the turn before; version 3; nil without blocks):
	// an agent compacts its history when it nears the model's window, and
	// a fresh prompt is a share of that history, not a length of its own.
	// Generate uses it in place of FreshPrompts / Turns, FreshInputTokens
	// and FreshKeptShare (freshctx.go).
	FreshByContext []FreshCond `json:"fresh_by_context,omitempty"`
	// Resumes counts the follow-ups, after a fresh prompt (a subagent
	// spawned by the previous turn), whose parent_seq names the turn the
	// fresh prompt branched off: they resume that turn's context. BranchTurns
	// counts the growing follow-ups that went on in the branch instead
	// (version 3). Generate resumes with the share Resumes / (Resumes +
	// BranchTurns).
	Resumes     int64 `json:"resumes,omitempty"`
	BranchTurns int64 `json:"branch_turns,omitempty"`
}

// FreshCond is one range of contexts of FollowUp.FreshByContext.
type FreshCond struct {
	// ContextMax is the range's largest context in tokens (ranges are in
	// increasing order; the last one also holds every longer context).
	ContextMax float64 `json:"context_max"`
	// Turns counts the follow-ups after a context in the range, and
	// FreshPrompts those that were fresh prompts.
	Turns        int64 `json:"turns"`
	FreshPrompts int64 `json:"fresh_prompts"`
	// Resumed counts the fresh prompts whose branch a later turn left for
	// the context it came off (a subagent's spawner; a compacted history
	// is never resumed): Generate keeps a fresh prompt's context to go
	// back to with the share Resumed / FreshPrompts.
	Resumed int64 `json:"resumed,omitempty"`
	// InputShare is the distribution of the fresh prompts' input over the
	// context, KeptShare of the share of their blocks the turn before held
	// (both empty without fresh prompts).
	InputShare Hist  `json:"input_share"`
	KeptShare  *Hist `json:"kept_share,omitempty"`
}

// Group is a prefix category (or the pooled tail of small categories) and
// its length model.
type Group struct {
	// Name is the category label ("" = no shared prefix).
	Name string `json:"name"`
	// Tail marks the pooled small categories; Generate labels their rows
	// "tail-<n>" with the fitted size distribution (TailCategories labels
	// for Records rows).
	Tail bool `json:"tail,omitempty"`
	// TailCategories is the number of distinct categories pooled.
	TailCategories int64 `json:"tail_categories,omitempty"`
	// Records is the group's record count; Share its share of the class.
	Records int64   `json:"records"`
	Share   float64 `json:"share"`
	// PrefixTokens is the distribution of Record.PrefixTokens.
	PrefixTokens Hist `json:"prefix_tokens"`
	// InputTokens is the distribution of Record.InputTokens.
	InputTokens Hist `json:"input_tokens"`
	// Joint holds, for consecutive ranges of InputTokens bins, the output
	// length distribution (and block reuse) of the rows in that range: the
	// joint shape of input and output.
	Joint []Cond `json:"output_given_input"`
	// Blocks is the share of rows carrying PrefixBlocks.
	Blocks float64 `json:"blocks_share,omitempty"`
	// ReuseDistance is the distribution of how many requests back (in the
	// class) the request whose prefix blocks a row reuses was.
	ReuseDistance *Hist `json:"reuse_distance,omitempty"`
	// FollowUp models the category's follow-up turns (version 2; nil when
	// it has none, or fewer than MinCategoryRecords: Sessions.PooledFollowUp).
	FollowUp *FollowUp `json:"follow_up,omitempty"`
	// SessionStarts counts the sessions whose second turn is in the
	// category, FollowUps its follow-up rows (version 2). Without a
	// category mix override, Generate draws a multi-turn session's
	// category by SessionStarts (and its turns from the category's
	// FollowUp.TurnsPerSession) and a single-shot row's by Records −
	// SessionStarts − FollowUps, so categories whose sessions run longer
	// keep their follow-ups.
	SessionStarts int64 `json:"session_starts,omitempty"`
	FollowUps     int64 `json:"follow_ups,omitempty"`
}

// Cond is the conditional model for one range of input bins.
type Cond struct {
	// InputBins is how many consecutive InputTokens bins the range covers.
	InputBins int `json:"input_bins"`
	// InputMax is the largest input length in the range (for reading).
	InputMax float64 `json:"input_max"`
	// OutputTokens is the output length distribution.
	OutputTokens Hist `json:"output_tokens"`
	// ReusedBlocks is the distribution of leading PrefixBlocks already seen
	// in earlier rows of the class, for rows that reuse at most the class's
	// SharedPrefixBlocks ("shallow" reuse: a common system prompt; nil
	// without blocks).
	ReusedBlocks *Hist `json:"reused_blocks,omitempty"`
	// DeepShare is the share of rows with blocks that reuse more than
	// SharedPrefixBlocks (a conversation continuing).
	DeepShare float64 `json:"deep_reuse_share,omitempty"`
	// DeepFraction is, for deep-reuse rows, the distribution of the share
	// of the row's blocks that are reused, so reuse scales with the length.
	DeepFraction *Hist `json:"deep_reuse_fraction,omitempty"`
}

// Sanity limits of a model file.
const (
	maxBinCount        = 1e9
	maxTurns           = 1000000
	maxBlocksPerRecord = 1 << 20
)

// LoadModel reads and validates a model. Truncated files, other versions
// (ErrModelVersion) and inconsistent contents (ErrBadModel: negative counts,
// overlapping bins, bad shares) are clear errors.
func LoadModel(r io.Reader) (*Model, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(64 << 10)
	if err := notAModel(head); err != nil {
		return nil, err // said before a trace is read whole
	}
	data, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("read model: %w", err)
	}
	return parseModel(data)
}

// notAModel says what head, the start of a file given as a model, is when
// it is a trace or the logs capture reads, the likely mistakes.
func notAModel(head []byte) error {
	if shape := traces.LogsShape(head); shape != "" {
		return fmt.Errorf("%w: this looks like %s, not a synth model: capture a trace from them (tokentrace capture), then fit a model to it (tokentrace synth fit)", ErrBadModel, shape)
	}
	if traces.LooksLikeTrace(head) {
		return fmt.Errorf("%w: this is a tokentrace trace, not a synth model: fit one to it with tokentrace synth fit", ErrBadModel)
	}
	return nil
}

// ReadModelFile loads the named model file ("-" = stdin).
func ReadModelFile(name string) (*Model, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fserr.Wrap("open model", name, err)
		}
		defer f.Close()
		r = f
	}
	m, err := LoadModel(r)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	return m, nil
}

func parseModel(data []byte) (*Model, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: empty file (want a JSON model from synth fit)", ErrBadModel)
	}
	// Check the header first so another version is reported as such even
	// if its body does not match this version's shape.
	var hdr struct {
		Format  string `json:"format"`
		Version *int   `json:"version"`
	}
	if err := json.Unmarshal(data, &hdr); err != nil {
		return nil, jsonErr(err)
	}
	if hdr.Format != ModelFormat {
		return nil, fmt.Errorf("%w: format is %q, want %q (is this a synth fit output?)", ErrBadModel, hdr.Format, ModelFormat)
	}
	if hdr.Version == nil {
		return nil, fmt.Errorf("%w: no version field", ErrBadModel)
	}
	if *hdr.Version < modelVersionNoFollowUps || *hdr.Version > ModelVersion {
		return nil, fmt.Errorf("%w %d (this tokentrace reads versions %d to %d; refit with synth fit)", ErrModelVersion, *hdr.Version, modelVersionNoFollowUps, ModelVersion)
	}
	var m Model
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, jsonErr(err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func jsonErr(err error) error {
	var se *json.SyntaxError
	if errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &se) && se.Error() == "unexpected end of JSON input") {
		return fmt.Errorf("%w: file is truncated (JSON ends early)", ErrBadModel)
	}
	return fmt.Errorf("%w: %v", ErrBadModel, err)
}

// Validate checks a model's invariants, in named steps: the header, then
// each class's shares, arrival process, sessions and categories.
func (m *Model) Validate() error {
	if err := m.validateHeader(); err != nil {
		return err
	}
	for ci := range m.Classes {
		c := &m.Classes[ci]
		where := fmt.Sprintf("classes[%d]", ci)
		if c.Records < 0 {
			return badModel("%s.records is negative", where)
		}
		for _, s := range append(append([]Share(nil), c.Models...), c.APIs...) {
			if s.Count < 0 || !(s.Share >= 0 && s.Share <= 1) {
				return badModel("%s share %q must be in [0, 1] with a count >= 0", where, s.Name)
			}
		}
		if err := validateArrival(&c.Arrival, where+".arrival"); err != nil {
			return err
		}
		if err := m.validateSessions(c.Sessions, where+".sessions"); err != nil {
			return err
		}
		if c.SharedPrefixBlocks < 0 {
			return badModel("%s.shared_prefix_blocks is negative", where)
		}
		if len(c.Groups) == 0 {
			return badModel("%s has no categories", where)
		}
		for gi := range c.Groups {
			if err := m.validateGroup(&c.Groups[gi], fmt.Sprintf("%s.categories[%d]", where, gi)); err != nil {
				return err
			}
		}
		if s := c.Sessions; s != nil && s.StartsPerBin != nil {
			if err := m.validateStarts(s.StartsPerBin, c.Arrival.CountsPerBin, where+".sessions.starts_per_bin"); err != nil {
				return err
			}
		}
	}
	return nil
}

// badModel is an ErrBadModel saying what is wrong.
func badModel(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadModel, fmt.Sprintf(format, a...))
}

// validateHeader checks the model's format, version, widths and classes.
func (m *Model) validateHeader() error {
	switch {
	case m.Format != ModelFormat:
		return badModel("format is %q, want %q", m.Format, ModelFormat)
	case m.Version < modelVersionNoFollowUps || m.Version > ModelVersion:
		return fmt.Errorf("%w %d", ErrModelVersion, m.Version)
	case m.BinNs <= 0:
		return badModel("bin_ns must be > 0, got %d", m.BinNs)
	case m.SpanNs <= 0:
		return badModel("span_ns must be > 0, got %d", m.SpanNs)
	case m.QuantumNs < 0:
		return badModel("quantum_ns must be >= 0, got %d", m.QuantumNs)
	case m.BlockSize < 0:
		return badModel("block_size must be >= 0, got %d", m.BlockSize)
	case m.BlockK < 0 || (m.BlockK > 0 && m.Version < 3):
		return badModel("block_k must be >= 0 and needs model version 3, got %d in version %d", m.BlockK, m.Version)
	case len(m.Classes) == 0:
		return badModel("no classes")
	}
	return nil
}

// validateArrival checks a class's counts per bin and gap levels.
func validateArrival(a *Arrival, where string) error {
	if len(a.CountsPerBin) == 0 {
		return badModel("%s.counts_per_bin is empty", where)
	}
	for i, v := range a.CountsPerBin {
		if !(v >= 0 && v <= maxBinCount) {
			return badModel("%s.counts_per_bin[%d] is negative, too large or not finite (%g; want 0 to %g)", where, i, v, float64(maxBinCount))
		}
	}
	prevMax := math.Inf(-1)
	for li := range a.Levels {
		lv := &a.Levels[li]
		lw := fmt.Sprintf("%s.gap_levels[%d]", where, li)
		if !(lv.MaxCount > prevMax) || math.IsInf(lv.MaxCount, 0) {
			return badModel("%s.max_count must increase from level to level", lw)
		}
		prevMax = lv.MaxCount
		if err := validateLevel(lv, lw); err != nil {
			return err
		}
	}
	return nil
}

// validateLevel checks one gap level's histograms, layout and fits.
func validateLevel(lv *GapLevel, lw string) error {
	g := &lv.Gap
	for _, h := range []struct {
		h        *Hist
		name     string
		lo       float64
		negative string // what a value below lo is
	}{{&g.Empirical, "gap_s.empirical", 0, "has negative gaps"}, {&lv.ClusterSizes, "cluster_size", 1, "must be >= 1"}, {&lv.IntraGapS, "intra_cluster_gap_s", 0, "has negative gaps"}} {
		if err := h.h.validate(lw + "." + h.name); err != nil {
			return badModel("%v", err)
		}
		if len(h.h.Bins) > 0 && h.h.Bins[0].Lo < h.lo {
			return badModel("%s.%s %s", lw, h.name, h.negative)
		}
	}
	if lv.Layout != LayoutEven && lv.Layout != LayoutClusters {
		return badModel("%s.layout must be %q or %q, got %q", lw, LayoutEven, LayoutClusters, lv.Layout)
	}
	if !(g.ZeroShare >= 0 && g.ZeroShare <= 1) {
		return badModel("%s.gap_s.zero_share must be in [0, 1]", lw)
	}
	for _, f := range g.Fits {
		for k, v := range f.Params {
			if !(v > 0) || math.IsInf(v, 0) {
				return badModel("%s gap fit %s parameter %s must be > 0, got %g", lw, f.Family, k, v)
			}
		}
	}
	return nil
}

// validateSessions checks a class's session structure (nil is fine).
func (m *Model) validateSessions(s *Sessions, where string) error {
	if s == nil {
		return nil
	}
	if !(s.Share >= 0 && s.Share <= 1) {
		return badModel("%s.share must be in [0, 1]", where)
	}
	if err := s.Turns.validate(where + ".turns"); err != nil {
		return badModel("%v", err)
	}
	if n := len(s.Turns.Bins); n > 0 && (s.Turns.Bins[n-1].Hi > maxTurns || s.Turns.Bins[0].Lo < 0) {
		return badModel("%s.turns must be in [0, %d]", where, maxTurns)
	}
	if err := s.GapS.validate(where + ".inter_turn_gap_s"); err != nil {
		return badModel("%v", err)
	}
	if err := m.validateFollowUp(s.PooledFollowUp, where+".pooled_follow_up"); err != nil {
		return err
	}
	if s.FollowUps < 0 || s.ThinkRecorded < 0 || s.ThinkFromFinishCount < 0 || s.ThinkFromGapCount < 0 {
		return badModel("%s has a negative follow-up count", where)
	}
	return nil
}

// validateStarts checks Sessions.StartsPerBin against the class's counts
// per bin.
func (m *Model) validateStarts(starts, counts []float64, where string) error {
	if m.Version < 3 {
		return badModel("%s needs model version 3, the file says %d", where, m.Version)
	}
	if len(starts) != len(counts) {
		return badModel("%s has %d bins, counts_per_bin %d", where, len(starts), len(counts))
	}
	for i, v := range starts {
		if !(v >= 0 && v <= counts[i]) {
			return badModel("%s[%d] must be in [0, counts_per_bin[%d]], got %g", where, i, i, v)
		}
	}
	return nil
}

// validateGroup checks one category: counts and shares, its length
// histograms, its joint model and its follow-ups.
func (m *Model) validateGroup(gr *Group, gw string) error {
	if gr.Records < 0 || !(gr.Share >= 0 && gr.Share <= 1) || !(gr.Blocks >= 0 && gr.Blocks <= 1) {
		return badModel("%s has a negative count or a share outside [0, 1]", gw)
	}
	for _, h := range []struct {
		h    *Hist
		name string
	}{{&gr.PrefixTokens, "prefix_tokens"}, {&gr.InputTokens, "input_tokens"}, {gr.ReuseDistance, "reuse_distance"}} {
		if h.h == nil {
			continue
		}
		if err := h.h.validate(gw + "." + h.name); err != nil {
			return badModel("%v", err)
		}
		if len(h.h.Bins) > 0 && h.h.Bins[0].Lo < 0 {
			return badModel("%s.%s has negative values", gw, h.name)
		}
		if n := len(h.h.Bins); n > 0 && h.h.Bins[n-1].Hi > math.MaxInt32 {
			return badModel("%s.%s has values above %d", gw, h.name, math.MaxInt32)
		}
	}
	for _, h := range []*Hist{&gr.InputTokens, &gr.PrefixTokens} {
		if n := len(h.Bins); n > 0 && m.BlockSize > 0 && h.Bins[n-1].Hi/float64(m.BlockSize) > maxBlocksPerRecord {
			return badModel("%s: tokens / block_size exceed %d blocks per request", gw, maxBlocksPerRecord)
		}
	}
	if err := validateJoint(gr, gw); err != nil {
		return err
	}
	if err := m.validateFollowUp(gr.FollowUp, gw+".follow_up"); err != nil {
		return err
	}
	if gr.SessionStarts < 0 || gr.FollowUps < 0 || gr.SessionStarts > gr.FollowUps || gr.FollowUps > gr.Records {
		return badModel("%s: session_starts and follow_ups must satisfy 0 ≤ session_starts ≤ follow_ups ≤ records", gw)
	}
	if (gr.SessionStarts > 0 || gr.FollowUps > 0) && m.Version < 2 {
		return badModel("%s.follow_ups needs model version 2, the file says %d", gw, m.Version)
	}
	return nil
}

// validateJoint checks a category's output-given-input ranges: they cover
// its non-empty input bins, with valid histograms and shares.
func validateJoint(gr *Group, gw string) error {
	nb := 0
	for _, b := range gr.InputTokens.Bins {
		if b.Count > 0 {
			nb++
		}
	}
	sum := 0
	for ki := range gr.Joint {
		k := &gr.Joint[ki]
		kw := fmt.Sprintf("%s.output_given_input[%d]", gw, ki)
		if k.InputBins <= 0 {
			return badModel("%s.input_bins must be > 0", kw)
		}
		sum += k.InputBins
		if err := k.OutputTokens.validate(kw + ".output_tokens"); err != nil {
			return badModel("%v", err)
		}
		if len(k.OutputTokens.Bins) > 0 && k.OutputTokens.Bins[0].Lo < 0 {
			return badModel("%s.output_tokens has negative values", kw)
		}
		for _, h := range []*Hist{k.ReusedBlocks, k.DeepFraction} {
			if h == nil {
				continue
			}
			if err := h.validate(kw + ".reused_blocks"); err != nil {
				return badModel("%v", err)
			}
			if len(h.Bins) > 0 && h.Bins[0].Lo < 0 {
				return badModel("%s block counts are negative", kw)
			}
		}
		if !(k.DeepShare >= 0 && k.DeepShare <= 1) {
			return badModel("%s.deep_reuse_share must be in [0, 1]", kw)
		}
	}
	if sum != nb {
		return badModel("%s.output_given_input covers %d input bins, input_tokens has %d", gw, sum, nb)
	}
	return nil
}

// lowestVersion is the lowest model version that holds m (see
// ModelVersion).
func (m *Model) lowestVersion() int {
	v := modelVersionNoFollowUps
	if m.BlockK > 0 {
		return ModelVersion
	}
	for ci := range m.Classes {
		c := &m.Classes[ci]
		s := c.Sessions
		if s != nil && s.StartsPerBin != nil {
			return ModelVersion
		}
		if s == nil || s.FollowUps == 0 {
			continue
		}
		v = max(v, modelVersionFollowUps)
		fus := []*FollowUp{s.PooledFollowUp}
		for gi := range c.Groups {
			fus = append(fus, c.Groups[gi].FollowUp)
		}
		for _, fu := range fus {
			if fu != nil && fu.v3() {
				v = ModelVersion
			}
		}
	}
	return v
}

// v3 says fu has a field of version 3.
func (fu *FollowUp) v3() bool {
	return fu.DroppedBlocks != nil || fu.FreshKeptShare != nil || len(fu.FreshByContext) > 0 || fu.Resumes > 0 || fu.BranchTurns > 0
}

// validateFollowUp checks a follow-up model (nil is fine); where names it.
func (m *Model) validateFollowUp(fu *FollowUp, where string) error {
	if fu == nil {
		return nil
	}
	if m.Version < 2 {
		return fmt.Errorf("%w: %s needs model version 2, the file says %d", ErrBadModel, where, m.Version)
	}
	if fu.Turns < 0 || fu.FreshPrompts < 0 || fu.FreshPrompts > fu.Turns {
		return fmt.Errorf("%w: %s.fresh_prompts must be in [0, turns]", ErrBadModel, where)
	}
	if fu.Resumes < 0 || fu.BranchTurns < 0 {
		return fmt.Errorf("%w: %s.resumes and branch_turns must be >= 0", ErrBadModel, where)
	}
	if fu.v3() && m.Version < 3 {
		return fmt.Errorf("%w: %s.dropped_blocks needs model version 3, the file says %d", ErrBadModel, where, m.Version)
	}
	for _, h := range []struct {
		h    *Hist
		name string
	}{{&fu.NewInputTokens, "new_input_tokens"}, {&fu.FreshInputTokens, "fresh_input_tokens"}, {&fu.OutputTokens, "output_tokens"}, {&fu.ThinkS, "think_s"}, {&fu.TurnsPerSession, "turns_per_session"}, {&fu.FirstInputTokens, "first_input_tokens"}, {fu.DroppedBlocks, "dropped_blocks"}, {fu.FreshKeptShare, "fresh_kept_share"}} {
		if h.h == nil {
			continue
		}
		if err := h.h.validate(where + "." + h.name); err != nil {
			return fmt.Errorf("%w: %v", ErrBadModel, err)
		}
		if n := len(h.h.Bins); n > 0 && (h.h.Bins[0].Lo < 0 || h.h.Bins[n-1].Hi > math.MaxInt32) {
			return fmt.Errorf("%w: %s.%s must be in [0, %d]", ErrBadModel, where, h.name, math.MaxInt32)
		}
	}
	return validateFreshConds(fu.FreshByContext, where+".fresh_by_context")
}

// validateFreshConds checks FollowUp.FreshByContext: contexts increasing,
// counts consistent, shares in [0, 1].
func validateFreshConds(fcs []FreshCond, where string) error {
	prev := math.Inf(-1)
	for i := range fcs {
		fc := &fcs[i]
		w := fmt.Sprintf("%s[%d]", where, i)
		if !(fc.ContextMax > prev) || math.IsInf(fc.ContextMax, 0) {
			return fmt.Errorf("%w: %s.context_max must increase from range to range", ErrBadModel, w)
		}
		prev = fc.ContextMax
		if fc.Turns < 0 || fc.FreshPrompts < 0 || fc.FreshPrompts > fc.Turns || fc.Resumed < 0 || fc.Resumed > fc.FreshPrompts {
			return fmt.Errorf("%w: %s: want 0 ≤ resumed ≤ fresh_prompts ≤ turns", ErrBadModel, w)
		}
		for _, h := range []*Hist{&fc.InputShare, fc.KeptShare} {
			if h == nil {
				continue
			}
			if err := h.validate(w); err != nil {
				return fmt.Errorf("%w: %v", ErrBadModel, err)
			}
			if n := len(h.Bins); n > 0 && (h.Bins[0].Lo < 0 || h.Bins[n-1].Hi > 1) {
				return fmt.Errorf("%w: %s shares must be in [0, 1]", ErrBadModel, w)
			}
		}
	}
	return nil
}

// WriteTo writes the model as indented JSON.
func (m *Model) WriteTo(w io.Writer) (int64, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return 0, fmt.Errorf("encode model: %w", err)
	}
	data = append(compactNumberArrays(data), '\n')
	n, err := w.Write(data)
	return int64(n), err
}

// compactNumberArrays puts arrays that hold only numbers on one line
// ([lo, hi, count] bins, counts per bin), so an indented model stays
// readable.
func compactNumberArrays(data []byte) []byte {
	out := make([]byte, 0, len(data))
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			out = append(out, c)
			switch c {
			case '\\':
				if i+1 < len(data) {
					i++
					out = append(out, data[i])
				}
			case '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
		}
		if c != '[' {
			out = append(out, c)
			continue
		}
		j := i + 1
		numeric := true
		for ; j < len(data) && data[j] != ']'; j++ {
			switch d := data[j]; {
			case d >= '0' && d <= '9', d == '-', d == '+', d == '.', d == 'e', d == 'E', d == ',', d == ' ', d == '\n', d == '\t':
			default:
				numeric = false
			}
			if !numeric {
				break
			}
		}
		if !numeric || j >= len(data) {
			out = append(out, c)
			continue
		}
		out = append(out, '[')
		for _, f := range bytes.Fields(data[i+1 : j]) {
			out = append(out, f...)
			if f[len(f)-1] == ',' {
				out = append(out, ' ')
			}
		}
		out = append(out, ']')
		i = j
	}
	return out
}

// WriteModelFile writes the model to the named file ("-" = stdout).
func WriteModelFile(name string, m *Model) error {
	if name == "-" {
		_, err := m.WriteTo(os.Stdout)
		return err
	}
	return atomicfile.WriteFile(name, func(w io.Writer) error {
		_, err := m.WriteTo(w)
		return err
	})
}
