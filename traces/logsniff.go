package traces

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/tokentrace/tokentrace/internal/logshape"
)

// Serving logs where a trace is expected are the likeliest first mistake:
// the readers recognise the log shapes capture reads and say what to run,
// instead of reading every line as a malformed row.

// ErrLogs is wrapped by the error of a file that holds serving logs (the
// input of capture), not a trace.
var ErrLogs = errors.New("serving logs, not a trace")

// LogsError is a file that looks like serving logs of one of the shapes
// capture reads.
type LogsError struct {
	File string
	// Shape says what it looks like, e.g. "gateway logs (OpenAI-style
	// JSON lines)".
	Shape string
}

func (e *LogsError) Error() string { return e.hint().String() }

// hint says what to run instead, the capture command structured (Text).
func (e *LogsError) hint() Text {
	capture := NewCommand("capture").With(CommandOut, "trace.parquet").WithArgs(e.File)
	return Textf("this looks like %s, not a trace: run `%s` first", e.Shape, capture)
}

// Unwrap is ErrLogs and the hint, which a caller says in its own terms.
func (e *LogsError) Unwrap() []error { return []error{ErrLogs, e.hint()} }

// logShapeOf recognises the first lines of serving logs, or returns "".
// The rules are capture's (internal/logshape), told only what proves logs;
// a line with a trace's metadata key or arrival_ns is a trace, whatever
// else it holds.
func logShapeOf(head []byte) string {
	line := logshape.FirstLine(bytes.TrimPrefix(head, utf8BOM))
	if bytes.HasPrefix(line, []byte("{")) && (bytes.Contains(line, []byte(`"`+jsonlMetaKey+`"`)) || bytes.Contains(line, []byte(`"arrival_ns"`))) {
		return "" // a trace's metadata or row
	}
	return logshape.Recognise(line).String()
}

// gzipMagic starts a gzip stream: capture reads gzip-compressed logs,
// traces are never gzip.
var gzipMagic = []byte{0x1F, 0x8B}

// gzipError explains a gzip-compressed input: logs to capture, or
// something to decompress first.
func gzipError(head []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(head))
	if err == nil {
		inner := make([]byte, 64<<10)
		n, _ := io.ReadFull(zr, inner)
		if shape := logShapeOf(inner[:n]); shape != "" {
			return &LogsError{Shape: shape + ", gzip-compressed"}
		}
	}
	return fmt.Errorf("%w: gzip-compressed content (tokentrace traces are Parquet, or JSON lines or CSV, optionally zstd-compressed): decompress it first", ErrUnknownFormat)
}

// LogsShape says what head, the first bytes of a file (gzip-compressed or
// not), looks like when it holds serving logs of a shape capture reads
// ("gateway logs (OpenAI-style JSON lines)", "vLLM server logs", ...), or
// "" when it does not: for commands whose input is not a trace either
// (synth gen's model) to say what they were given.
func LogsShape(head []byte) string {
	if bytes.HasPrefix(head, gzipMagic) {
		var le *LogsError
		if errors.As(gzipError(head), &le) {
			return le.Shape
		}
		return ""
	}
	return logShapeOf(head)
}

// LooksLikeTrace reports whether head, the first bytes of a file, starts a
// tokentrace trace: Parquet or zstd magic, a JSONL metadata line or row,
// or a CSV header of trace columns.
func LooksLikeTrace(head []byte) bool {
	trimmed := bytes.TrimLeft(bytes.TrimPrefix(head, utf8BOM), " \t\r\n")
	return bytes.HasPrefix(head, []byte(parquetMagic)) || bytes.HasPrefix(head, zstdMagic) ||
		bytes.HasPrefix(trimmed, []byte(csvMetaPrefix)) ||
		bytes.HasPrefix(trimmed, []byte("{")) && (bytes.Contains(head, []byte(`"`+jsonlMetaKey+`"`)) || bytes.Contains(head, []byte(`"arrival_ns"`))) ||
		!bytes.HasPrefix(trimmed, []byte("{")) && looksLikeCSVHeader(trimmed)
}
