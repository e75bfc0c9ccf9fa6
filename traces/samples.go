package traces

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"github.com/tokentrace/tokentrace/internal/fserr"
)

// MetricsSample is one point of the server metrics time series that replay
// scrapes from a Prometheus /metrics endpoint (vLLM metric names) during a
// run. Gauges are the values at the scrape; every other number is a delta
// over the interval since the previous successful scrape, summed over all
// label sets (models, engines). NotReported (-1) marks a value the server
// did not expose or that has no meaning in the interval (a mean over zero
// requests, a hit rate over zero queries).
//
// The struct tags define the Parquet schema of results.metrics.parquet; the
// JSONL and CSV codecs use the same column names.
type MetricsSample struct {
	// TimeNs is the scrape's offset from the run start.
	TimeNs int64 `parquet:"time_ns,delta" json:"time_ns"`
	// IntervalNs is the time since the previous successful scrape (0 for the
	// first one).
	IntervalNs int64 `parquet:"interval_ns,delta" json:"interval_ns"`
	// Waiting is vllm:num_requests_waiting (requests queued in the scheduler).
	Waiting int64 `parquet:"waiting,delta" json:"waiting"`
	// Running is vllm:num_requests_running.
	Running int64 `parquet:"running,delta" json:"running"`
	// KVCacheUsage is vllm:kv_cache_usage_perc (or the older
	// vllm:gpu_cache_usage_perc), a fraction in [0, 1]; with several engines,
	// their mean.
	KVCacheUsage float64 `parquet:"kv_cache_usage" json:"kv_cache_usage"`
	// PrefixHitRate is Δhits/Δqueries of vllm:prefix_cache_* (in tokens) over
	// the interval; NotReported when there were no queries.
	PrefixHitRate float64 `parquet:"prefix_hit_rate" json:"prefix_hit_rate"`
	// Preemptions is the Δ of vllm:num_preemptions over the interval.
	Preemptions int64 `parquet:"preemptions,delta" json:"preemptions"`
	// QueueTimeMeanNs is Δsum/Δcount of vllm:request_queue_time_seconds: the
	// mean queueing time of the requests that finished in the interval.
	QueueTimeMeanNs int64 `parquet:"queue_time_mean_ns,delta" json:"queue_time_mean_ns"`
	// PrefillTimeMeanNs is the same for vllm:request_prefill_time_seconds.
	PrefillTimeMeanNs int64 `parquet:"prefill_time_mean_ns,delta" json:"prefill_time_mean_ns"`
	// DecodeTimeMeanNs is the same for vllm:request_decode_time_seconds.
	DecodeTimeMeanNs int64 `parquet:"decode_time_mean_ns,delta" json:"decode_time_mean_ns"`
	// RequestsFinished is the Δ of vllm:request_success (all finish reasons),
	// or of the e2e latency histogram's count where that counter is absent.
	RequestsFinished int64 `parquet:"requests_finished,delta" json:"requests_finished"`
	// PromptTokens is the Δ of vllm:prompt_tokens (prompt tokens processed).
	PromptTokens int64 `parquet:"prompt_tokens,delta" json:"prompt_tokens"`
	// GenerationTokens is the Δ of vllm:generation_tokens.
	GenerationTokens int64 `parquet:"generation_tokens,delta" json:"generation_tokens"`
	// ScrapeError is a short message when this scrape failed ("" = ok); the
	// other columns are then NotReported.
	ScrapeError string `parquet:"scrape_error,dict" json:"scrape_error"`
	// Instance is the server instance (Prometheus' instance label) the row
	// describes; "" for a row over every instance (replay's scrape of one
	// server, or the pooled series of several). A series read from
	// Prometheus with several instances has the pooled rows and then each
	// instance's rows at the same times. Files written before this column
	// read as "".
	Instance string `parquet:"instance,dict" json:"instance,omitempty"`
	// Role is an instance row's role in a fleet, the value of the label
	// postmortem was told holds it (llm-d's llm-d.ai/role: prefill, decode;
	// tokentrace sim's role label adds prefill-decode for an aggregated
	// replica); "" on pooled rows and where no role was read. Files
	// written before this column read as "".
	Role string `parquet:"role,dict" json:"role,omitempty"`
	// KVTransferTimeMeanNs is Δsum/Δcount of vllm:nixl_xfer_time_seconds,
	// vLLM's NIXL connector's histogram of KV transfers, observed by the
	// instance that pulls the KV (a decode replica under prefill/decode
	// disaggregation): the mean duration of the transfers that finished
	// in the interval. NotReported without NIXL series or transfers.
	KVTransferTimeMeanNs int64 `parquet:"kv_transfer_time_mean_ns,delta" json:"kv_transfer_time_mean_ns"`
	// KVTransfers is the Δcount of that histogram: KV transfers finished
	// in the interval.
	KVTransfers int64 `parquet:"kv_transfers,delta" json:"kv_transfers"`
	// Routed is the Δ of the router's count of requests it sent to the
	// instance (tokentrace sim's tokentrace_router_decisions_total), where
	// the router exports one per replica.
	Routed int64 `parquet:"routed,delta" json:"routed"`
}

// NewMetricsSample returns a sample at timeNs with every value NotReported.
func NewMetricsSample(timeNs int64) MetricsSample {
	return MetricsSample{
		TimeNs:            timeNs,
		Waiting:           NotReported,
		Running:           NotReported,
		KVCacheUsage:      NotReported,
		PrefixHitRate:     NotReported,
		Preemptions:       NotReported,
		QueueTimeMeanNs:   NotReported,
		PrefillTimeMeanNs: NotReported,
		DecodeTimeMeanNs:  NotReported,
		RequestsFinished:  NotReported,
		PromptTokens:      NotReported,
		GenerationTokens:  NotReported,

		KVTransferTimeMeanNs: NotReported,
		KVTransfers:          NotReported,
		Routed:               NotReported,
	}
}

// SampleColumns lists the MetricsSample columns in file order.
var SampleColumns = []string{
	"time_ns", "interval_ns", "waiting", "running", "kv_cache_usage", "prefix_hit_rate",
	"preemptions", "queue_time_mean_ns", "prefill_time_mean_ns", "decode_time_mean_ns",
	"requests_finished", "prompt_tokens", "generation_tokens", "scrape_error", "instance",
	"role", "kv_transfer_time_mean_ns", "kv_transfers", "routed",
}

// SamplesPathFor returns where the metrics series of a results file goes:
// "results.metrics.parquet" beside "results.parquet" (any results extension,
// compressed ones included, is replaced); "-" gives "metrics.parquet".
func SamplesPathFor(resultsPath string) string {
	if resultsPath == "" || resultsPath == "-" {
		return "metrics.parquet"
	}
	if resultsPath == os.DevNull {
		return os.DevNull // results not kept: neither is their series
	}
	base := resultsPath
	lower := strings.ToLower(base)
	for _, ext := range []string{".jsonl.zst", ".ndjson.zst", ".json.zst", ".csv.zst", ".parquet", ".pq", ".jsonl", ".ndjson", ".json", ".csv"} {
		if strings.HasSuffix(lower, ext) {
			base = base[:len(base)-len(ext)]
			break
		}
	}
	return base + ".metrics.parquet"
}

// WriteSamples writes a metrics series to the named file, codec by extension
// (.parquet with zstd, .jsonl, .jsonl.zst, .csv, .csv.zst; "-" is JSONL on
// stdout), with metadata m.
func WriteSamples(name string, m Meta, s []MetricsSample) (err error) {
	if m.SchemaVersion == "" {
		m.SchemaVersion = SchemaVersion
	}
	format, err := FormatOf(name)
	if err != nil {
		return fmt.Errorf("write metrics %s: %w", name, err)
	}
	var f io.WriteCloser = samplesStdout{os.Stdout}
	if name != "-" {
		af, cerr := atomicfile.Create(name)
		if cerr != nil {
			return fmt.Errorf("write metrics: %w", cerr)
		}
		f = af
	}
	defer func() {
		if a, ok := f.(*atomicfile.File); ok && err != nil {
			a.Abort() // never a partial file under the final name
		}
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write metrics: %w", cerr)
		}
	}()
	switch format {
	case FormatParquet:
		err = samplesWriteParquet(f, m, s)
	case FormatJSONL, FormatCSV:
		err = samplesWriteText(f, format, m, s)
	case FormatJSONLZstd, FormatCSVZstd:
		var zw *zstd.Encoder
		if zw, err = zstd.NewWriter(f); err != nil {
			break
		}
		inner := FormatJSONL
		if format == FormatCSVZstd {
			inner = FormatCSV
		}
		err = samplesWriteText(zw, inner, m, s)
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
	default:
		err = fmt.Errorf("%w %q", ErrUnknownFormat, format)
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) { // the file's own error names it already
			return fmt.Errorf("write metrics: %w", err)
		}
		return fmt.Errorf("write metrics %s: %w", name, err)
	}
	return nil
}

func samplesWriteParquet(w io.Writer, m Meta, s []MetricsSample) error {
	opts := []parquet.WriterOption{
		parquet.Compression(&parquet.Zstd),
		parquet.MaxRowsPerRowGroup(DefaultRowGroupRows),
		parquet.CreatedBy("tokentrace", SchemaVersion, ""),
	}
	for _, kv := range m.KeyValues() {
		opts = append(opts, parquet.KeyValueMetadata(kv[0], kv[1]))
	}
	pw := parquet.NewGenericWriter[MetricsSample](w, opts...)
	if _, err := pw.Write(s); err != nil {
		pw.Close()
		return err
	}
	return pw.Close()
}

func samplesWriteText(w io.Writer, format Format, m Meta, s []MetricsSample) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	switch format {
	case FormatJSONL:
		enc := json.NewEncoder(bw)
		if err := enc.Encode(map[string]Meta{jsonlMetaKey: m.Redacted()}); err != nil {
			return err
		}
		for i := range s {
			if err := enc.Encode(&s[i]); err != nil {
				return err
			}
		}
	case FormatCSV:
		meta, err := json.Marshal(m.Redacted())
		if err != nil {
			return err
		}
		fmt.Fprintf(bw, "#tokentrace %s\n", meta)
		cw := csv.NewWriter(bw)
		if err := cw.Write(SampleColumns); err != nil {
			return err
		}
		row := make([]string, len(SampleColumns))
		for i := range s {
			samplesToRow(&s[i], row)
			if err := cw.Write(row); err != nil {
				return err
			}
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func samplesToRow(s *MetricsSample, row []string) {
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	f64 := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	row[0], row[1], row[2], row[3] = i64(s.TimeNs), i64(s.IntervalNs), i64(s.Waiting), i64(s.Running)
	row[4], row[5], row[6] = f64(s.KVCacheUsage), f64(s.PrefixHitRate), i64(s.Preemptions)
	row[7], row[8], row[9] = i64(s.QueueTimeMeanNs), i64(s.PrefillTimeMeanNs), i64(s.DecodeTimeMeanNs)
	row[10], row[11], row[12], row[13] = i64(s.RequestsFinished), i64(s.PromptTokens), i64(s.GenerationTokens), s.ScrapeError
	row[14], row[15], row[16], row[17], row[18] = s.Instance, s.Role, i64(s.KVTransferTimeMeanNs), i64(s.KVTransfers), i64(s.Routed)
}

// samplesFromRow fills s from a CSV row whose columns are named by header.
func samplesFromRow(header, row []string, s *MetricsSample) error {
	for i, col := range header {
		if i >= len(row) {
			break
		}
		v := row[i]
		var err error
		i64 := func(dst *int64) { *dst, err = strconv.ParseInt(v, 10, 64) }
		f64 := func(dst *float64) { *dst, err = strconv.ParseFloat(v, 64) }
		switch col {
		case "time_ns":
			i64(&s.TimeNs)
		case "interval_ns":
			i64(&s.IntervalNs)
		case "waiting":
			i64(&s.Waiting)
		case "running":
			i64(&s.Running)
		case "kv_cache_usage":
			f64(&s.KVCacheUsage)
		case "prefix_hit_rate":
			f64(&s.PrefixHitRate)
		case "preemptions":
			i64(&s.Preemptions)
		case "queue_time_mean_ns":
			i64(&s.QueueTimeMeanNs)
		case "prefill_time_mean_ns":
			i64(&s.PrefillTimeMeanNs)
		case "decode_time_mean_ns":
			i64(&s.DecodeTimeMeanNs)
		case "requests_finished":
			i64(&s.RequestsFinished)
		case "prompt_tokens":
			i64(&s.PromptTokens)
		case "generation_tokens":
			i64(&s.GenerationTokens)
		case "scrape_error":
			s.ScrapeError = v
		case "instance":
			s.Instance = v
		case "role":
			s.Role = v
		case "kv_transfer_time_mean_ns":
			i64(&s.KVTransferTimeMeanNs)
		case "kv_transfers":
			i64(&s.KVTransfers)
		case "routed":
			i64(&s.Routed)
		}
		if err != nil {
			return fmt.Errorf("column %s: not a number", col)
		}
	}
	return nil
}

// ReadSamples reads a metrics series written by WriteSamples. The codec is
// sniffed from the content (Parquet, zstd, JSONL or CSV); "-" is stdin
// (not Parquet). Malformed rows fail the read with a *RowError naming the
// line.
func ReadSamples(name string) ([]MetricsSample, Meta, error) {
	var f *os.File = os.Stdin
	if name != "-" {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, Meta{}, fserr.Wrap("read metrics", name, err)
		}
		defer f.Close()
	}
	s, m, err := samplesRead(f, samplesDisplay(name))
	if err != nil {
		return s, m, fmt.Errorf("read metrics %s: %w", samplesDisplay(name), err)
	}
	return s, m, nil
}

var samplesZstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}

func samplesRead(f *os.File, name string) ([]MetricsSample, Meta, error) {
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(4)
	switch {
	case bytes.Equal(head, []byte("PAR1")):
		if f == os.Stdin {
			return nil, Meta{}, errors.New("parquet cannot be read from stdin; give a file name")
		}
		return samplesReadParquet(f)
	case bytes.Equal(head, samplesZstdMagic):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return nil, Meta{}, err
		}
		defer zr.Close()
		return samplesReadText(bufio.NewReaderSize(zr, 64<<10), name)
	}
	return samplesReadText(br, name)
}

func samplesReadParquet(f *os.File) ([]MetricsSample, Meta, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, Meta{}, err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, Meta{}, err
	}
	var kv [][2]string
	for _, p := range pf.Metadata().KeyValueMetadata {
		kv = append(kv, [2]string{p.Key, p.Value})
	}
	m, err := MetaFromKeyValues(kv)
	if err != nil {
		return nil, m, err
	}
	if err := m.CheckVersion(); err != nil {
		return nil, m, err
	}
	if _, ok := pf.Schema().Lookup("time_ns"); !ok {
		return nil, m, fmt.Errorf("%w: not a metrics series (no time_ns column)", ErrUnknownFormat)
	}
	// Columns added after the first files were written read as zero
	// there; they were not reported.
	var absent []func(s *MetricsSample)
	for _, c := range []struct {
		name string
		set  func(s *MetricsSample)
	}{
		{"kv_transfer_time_mean_ns", func(s *MetricsSample) { s.KVTransferTimeMeanNs = NotReported }},
		{"kv_transfers", func(s *MetricsSample) { s.KVTransfers = NotReported }},
		{"routed", func(s *MetricsSample) { s.Routed = NotReported }},
	} {
		if _, ok := pf.Schema().Lookup(c.name); !ok {
			absent = append(absent, c.set)
		}
	}
	r := parquet.NewGenericReader[MetricsSample](pf)
	defer r.Close()
	out := make([]MetricsSample, 0, r.NumRows())
	buf := make([]MetricsSample, 1024)
	for {
		n, err := r.Read(buf)
		for i := range buf[:n] {
			for _, set := range absent {
				set(&buf[i])
			}
		}
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, m, nil
		}
		if err != nil {
			return out, m, err
		}
	}
}

func samplesReadText(br *bufio.Reader, name string) ([]MetricsSample, Meta, error) {
	m := NewMeta("")
	first, _ := br.Peek(1)
	if len(first) == 0 {
		return nil, m, nil // an empty file is an empty series
	}
	if first[0] == '{' {
		return samplesReadJSONL(br, name)
	}
	// CSV, optionally after a "#tokentrace {json}" metadata line.
	line := int64(0)
	if first[0] == '#' {
		l, err := br.ReadString('\n')
		line++
		if meta, ok := strings.CutPrefix(strings.TrimSpace(l), "#tokentrace "); ok {
			if jerr := json.Unmarshal([]byte(meta), &m); jerr != nil {
				return nil, m, &RowError{File: name, Line: 1, Err: errors.New("metadata line is not JSON")}
			}
			if verr := m.CheckVersion(); verr != nil {
				return nil, m, verr
			}
			m = m.Redacted()
		}
		if err != nil && err != io.EOF {
			return nil, m, err
		}
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err == io.EOF {
		return nil, m, nil
	}
	line++
	if err != nil {
		return nil, m, &RowError{File: name, Line: line, Err: errors.New("bad CSV header")}
	}
	if len(header) == 0 || header[0] != "time_ns" {
		return nil, m, fmt.Errorf("%w: not a metrics series (want a time_ns column first)", ErrUnknownFormat)
	}
	var out []MetricsSample
	for {
		row, err := cr.Read()
		if err == io.EOF {
			return out, m, nil
		}
		line++
		if err != nil {
			return out, m, &RowError{File: name, Line: line, Err: errors.New("bad CSV row")}
		}
		s := NewMetricsSample(0)
		if err := samplesFromRow(header, row, &s); err != nil {
			return out, m, &RowError{File: name, Line: line, Err: err}
		}
		out = append(out, s)
	}
}

func samplesReadJSONL(br *bufio.Reader, name string) ([]MetricsSample, Meta, error) {
	m := NewMeta("")
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var out []MetricsSample
	line := int64(0)
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if line == 1 && bytes.Contains(b, []byte(`"`+jsonlMetaKey+`"`)) {
			var hdr map[string]Meta
			if err := json.Unmarshal(b, &hdr); err != nil {
				return nil, m, &RowError{File: name, Line: 1, Err: errors.New("metadata line is not JSON")}
			}
			m = hdr[jsonlMetaKey].Redacted()
			if err := m.CheckVersion(); err != nil {
				return nil, m, err
			}
			continue
		}
		s := NewMetricsSample(0)
		if !bytes.Contains(b, []byte(`"time_ns"`)) {
			return out, m, &RowError{File: name, Line: line, Err: errors.New("not a metrics sample (no time_ns)")}
		}
		if err := json.Unmarshal(b, &s); err != nil {
			return out, m, &RowError{File: name, Line: line, Err: errors.New("not a JSON metrics sample")}
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return out, m, &RowError{File: name, Line: line + 1, Err: err}
	}
	return out, m, nil
}

// samplesStdout is stdout that Close leaves open.
type samplesStdout struct{ io.Writer }

func (samplesStdout) Close() error { return nil }

func samplesDisplay(name string) string {
	if name == "-" {
		return "stdin"
	}
	return name
}
