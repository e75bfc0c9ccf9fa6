package analyze

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/tokentrace/tokentrace/internal/atomicfile"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// RequestsColumns are the columns of the per-request attribution file;
// tail is true for the requests in the tail the report attributes
// (Options.TailPercentile of Options.TailMetric), false for the others.
var RequestsColumns = []string{"seq", "request_id", "lateness_ns", "queue_ns", "prefill_ns", "decode_ns", "other_ns", "source", "tail"}

// FleetRequestsColumns follow RequestsColumns when the results name the
// replicas that served them (Report.Fleet).
var FleetRequestsColumns = []string{"kv_transfer_ns", "decode_queue_ns", "replica", "prefill_replica"}

// Per-request attribution file formats.
const (
	RequestsCSV   = "csv"
	RequestsJSONL = "jsonl"
)

// WriteRequests writes every successful request's attribution (see
// PerRequest), the tail marked, as CSV with a header row or as JSON
// lines, with exactly RequestsColumns, then FleetRequestsColumns when the
// results name replicas (JSON lines leave them out where empty).
func (rep *Report) WriteRequests(w io.Writer, format string) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	switch format {
	case RequestsCSV:
		cw := csv.NewWriter(bw)
		cols := RequestsColumns
		fleet := rep.Fleet != nil
		if fleet {
			cols = append(slices.Clone(cols), FleetRequestsColumns...)
		}
		if err := cw.Write(cols); err != nil {
			return err
		}
		rec := make([]string, len(cols))
		for r, err := range rep.PerRequest() {
			if err != nil {
				return err
			}
			rec[0] = strconv.FormatInt(r.Seq, 10)
			rec[1] = r.RequestID
			rec[2] = strconv.FormatInt(r.Lateness, 10)
			rec[3] = strconv.FormatInt(r.Queue, 10)
			rec[4] = strconv.FormatInt(r.Prefill, 10)
			rec[5] = strconv.FormatInt(r.Decode, 10)
			rec[6] = strconv.FormatInt(r.Other, 10)
			rec[7] = r.Source
			rec[8] = strconv.FormatBool(r.Tail)
			if fleet {
				rec[9] = strconv.FormatInt(r.KVTransfer, 10)
				rec[10] = strconv.FormatInt(r.DecodeQueue, 10)
				rec[11], rec[12] = r.Replica, r.PrefillReplica
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
	case RequestsJSONL:
		enc := json.NewEncoder(bw)
		for r, err := range rep.PerRequest() {
			if err == nil {
				err = enc.Encode(r)
			}
			if err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("per-request attribution format %q: want %s or %s", format, RequestsCSV, RequestsJSONL)
	}
	return bw.Flush()
}

// RequestsFormat picks the format from a file name: .csv (.csv.zst) or
// .jsonl (.jsonl.zst, "-" = stdout as JSON lines). Parquet is refused: only
// package traces writes Parquet, and its Writer takes Records.
func RequestsFormat(name string) (format string, zst bool, err error) {
	n := strings.ToLower(name)
	if n == "-" || name == os.DevNull {
		return RequestsJSONL, false, nil
	}
	n, zst = strings.CutSuffix(n, ".zst")
	switch {
	case strings.HasSuffix(n, ".csv"):
		return RequestsCSV, zst, nil
	case strings.HasSuffix(n, ".jsonl"), strings.HasSuffix(n, ".json"), strings.HasSuffix(n, ".ndjson"):
		return RequestsJSONL, zst, nil
	}
	return "", false, fmt.Errorf("analyze: requests file %s: want a .csv or .jsonl name (optionally .zst); Parquet is not supported for this side table", name)
}

// WriteRequestsFile writes the per-request attribution to the named file,
// the format chosen by RequestsFormat; stdout is w when name is "-".
func (rep *Report) WriteRequestsFile(name string, stdout io.Writer) (err error) {
	format, zst, err := RequestsFormat(name)
	if err != nil {
		return err
	}
	if name == "-" {
		return rep.WriteRequests(stdout, format)
	}
	// Written beside the final name and renamed at the end: a failed
	// write never leaves a partial file under name.
	return atomicfile.WriteFile(name, func(w io.Writer) error {
		if !zst {
			return rep.WriteRequests(w, format)
		}
		zw, err := zstd.NewWriter(w)
		if err != nil {
			return err
		}
		if err := rep.WriteRequests(zw, format); err != nil {
			zw.Close()
			return err
		}
		return zw.Close()
	})
}
