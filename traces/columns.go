package traces

import (
	"fmt"
	"strconv"
)

// Columns lists every column name in schema order: the Parquet column names,
// the JSON keys and the CSV header.
var Columns = []string{
	"seq", "arrival_ns", "session", "turn", "category", "prefix_tokens", "prefix_blocks",
	"input_tokens", "output_tokens", "model", "api", "class",
	"run", "scheduled_ns", "sent_ns", "first_token_ns", "last_token_ns", "chunk_ns", "chunk_tokens",
	"server_prompt_tokens", "server_output_tokens", "server_cached_tokens",
	"server_queue_ns", "server_prefill_ns", "server_decode_ns", "server_preemptions",
	"status", "http_status", "error", "request_id",
}

// Column indices into Columns.
const (
	colSeq = iota
	colArrivalNs
	colSession
	colTurn
	colCategory
	colPrefixTokens
	colPrefixBlocks
	colInputTokens
	colOutputTokens
	colModel
	colAPI
	colClass
	colRun
	colScheduledNs
	colSentNs
	colFirstTokenNs
	colLastTokenNs
	colChunkNs
	colChunkTokens
	colServerPromptTokens
	colServerOutputTokens
	colServerCachedTokens
	colServerQueueNs
	colServerPrefillNs
	colServerDecodeNs
	colServerPreemptions
	colStatus
	colHTTPStatus
	colError
	colRequestID
	numColumns
)

// columnIndex maps a column name to its index in Columns.
var columnIndex = func() map[string]int {
	m := make(map[string]int, len(Columns))
	for i, c := range Columns {
		m[c] = i
	}
	return m
}()

// notReportedColumn reports whether a column reads as NotReported (-1) when
// it is absent from a file (the numeric outcome columns except http_status).
func notReportedColumn(col int) bool {
	switch col {
	case colScheduledNs, colSentNs, colFirstTokenNs, colLastTokenNs,
		colServerPromptTokens, colServerOutputTokens, colServerCachedTokens,
		colServerQueueNs, colServerPrefillNs, colServerDecodeNs, colServerPreemptions:
		return true
	}
	return false
}

// setNotReported sets a notReportedColumn to NotReported.
func (r *Record) setNotReported(col int) {
	switch col {
	case colScheduledNs:
		r.ScheduledNs = NotReported
	case colSentNs:
		r.SentNs = NotReported
	case colFirstTokenNs:
		r.FirstTokenNs = NotReported
	case colLastTokenNs:
		r.LastTokenNs = NotReported
	case colServerPromptTokens:
		r.ServerPromptTokens = NotReported
	case colServerOutputTokens:
		r.ServerOutputTokens = NotReported
	case colServerCachedTokens:
		r.ServerCachedTokens = NotReported
	case colServerQueueNs:
		r.ServerQueueNs = NotReported
	case colServerPrefillNs:
		r.ServerPrefillNs = NotReported
	case colServerDecodeNs:
		r.ServerDecodeNs = NotReported
	case colServerPreemptions:
		r.ServerPreemptions = NotReported
	}
}

// Validate reports the first reason r is not a valid record: negative token
// counts or lengths. Decoders treat such rows as malformed.
func (r *Record) Validate() error {
	switch {
	case r.InputTokens < 0:
		return fmt.Errorf("negative input_tokens %d", r.InputTokens)
	case r.OutputTokens < 0:
		return fmt.Errorf("negative output_tokens %d", r.OutputTokens)
	case r.PrefixTokens < 0:
		return fmt.Errorf("negative prefix_tokens %d", r.PrefixTokens)
	case r.Turn < 0:
		return fmt.Errorf("negative turn %d", r.Turn)
	}
	for _, t := range r.ChunkTokens {
		if t < 0 {
			return fmt.Errorf("negative chunk_tokens entry %d", t)
		}
	}
	return nil
}

// normalizeLists makes empty lists nil, so every codec reads back the same
// value for "no list".
func (r *Record) normalizeLists() {
	if len(r.PrefixBlocks) == 0 {
		r.PrefixBlocks = nil
	}
	if len(r.ChunkNs) == 0 {
		r.ChunkNs = nil
	}
	if len(r.ChunkTokens) == 0 {
		r.ChunkTokens = nil
	}
}

// isDefault reports whether column col of r holds the value a decoder starts
// from (NewRecord), so text codecs may leave it out.
func (r *Record) isDefault(col int) bool {
	switch col {
	case colSeq:
		return r.Seq == 0
	case colArrivalNs:
		return r.ArrivalNs == 0
	case colSession:
		return r.Session == 0
	case colTurn:
		return r.Turn == 0
	case colCategory:
		return r.Category == ""
	case colPrefixTokens:
		return r.PrefixTokens == 0
	case colPrefixBlocks:
		return len(r.PrefixBlocks) == 0
	case colInputTokens:
		return r.InputTokens == 0
	case colOutputTokens:
		return r.OutputTokens == 0
	case colModel:
		return r.Model == ""
	case colAPI:
		return r.API == ""
	case colClass:
		return r.Class == ""
	case colRun:
		return r.Run == ""
	case colScheduledNs:
		return r.ScheduledNs == NotReported
	case colSentNs:
		return r.SentNs == NotReported
	case colFirstTokenNs:
		return r.FirstTokenNs == NotReported
	case colLastTokenNs:
		return r.LastTokenNs == NotReported
	case colChunkNs:
		return len(r.ChunkNs) == 0
	case colChunkTokens:
		return len(r.ChunkTokens) == 0
	case colServerPromptTokens:
		return r.ServerPromptTokens == NotReported
	case colServerOutputTokens:
		return r.ServerOutputTokens == NotReported
	case colServerCachedTokens:
		return r.ServerCachedTokens == NotReported
	case colServerQueueNs:
		return r.ServerQueueNs == NotReported
	case colServerPrefillNs:
		return r.ServerPrefillNs == NotReported
	case colServerDecodeNs:
		return r.ServerDecodeNs == NotReported
	case colServerPreemptions:
		return r.ServerPreemptions == NotReported
	case colStatus:
		return r.Status == ""
	case colHTTPStatus:
		return r.HTTPStatus == 0
	case colError:
		return r.Error == ""
	case colRequestID:
		return r.RequestID == ""
	}
	return true
}

// appendText appends column col of r as CSV cell text (before quoting):
// numbers in decimal, lists as space-separated decimals, strings as is.
func (r *Record) appendText(dst []byte, col int) []byte {
	switch col {
	case colSeq:
		return strconv.AppendInt(dst, r.Seq, 10)
	case colArrivalNs:
		return strconv.AppendInt(dst, r.ArrivalNs, 10)
	case colSession:
		return strconv.AppendInt(dst, r.Session, 10)
	case colTurn:
		return strconv.AppendInt(dst, int64(r.Turn), 10)
	case colCategory:
		return append(dst, r.Category...)
	case colPrefixTokens:
		return strconv.AppendInt(dst, int64(r.PrefixTokens), 10)
	case colPrefixBlocks:
		return appendInts64(dst, r.PrefixBlocks, ' ')
	case colInputTokens:
		return strconv.AppendInt(dst, int64(r.InputTokens), 10)
	case colOutputTokens:
		return strconv.AppendInt(dst, int64(r.OutputTokens), 10)
	case colModel:
		return append(dst, r.Model...)
	case colAPI:
		return append(dst, r.API...)
	case colClass:
		return append(dst, r.Class...)
	case colRun:
		return append(dst, r.Run...)
	case colScheduledNs:
		return strconv.AppendInt(dst, r.ScheduledNs, 10)
	case colSentNs:
		return strconv.AppendInt(dst, r.SentNs, 10)
	case colFirstTokenNs:
		return strconv.AppendInt(dst, r.FirstTokenNs, 10)
	case colLastTokenNs:
		return strconv.AppendInt(dst, r.LastTokenNs, 10)
	case colChunkNs:
		return appendInts64(dst, r.ChunkNs, ' ')
	case colChunkTokens:
		return appendInts32(dst, r.ChunkTokens, ' ')
	case colServerPromptTokens:
		return strconv.AppendInt(dst, int64(r.ServerPromptTokens), 10)
	case colServerOutputTokens:
		return strconv.AppendInt(dst, int64(r.ServerOutputTokens), 10)
	case colServerCachedTokens:
		return strconv.AppendInt(dst, int64(r.ServerCachedTokens), 10)
	case colServerQueueNs:
		return strconv.AppendInt(dst, r.ServerQueueNs, 10)
	case colServerPrefillNs:
		return strconv.AppendInt(dst, r.ServerPrefillNs, 10)
	case colServerDecodeNs:
		return strconv.AppendInt(dst, r.ServerDecodeNs, 10)
	case colServerPreemptions:
		return strconv.AppendInt(dst, int64(r.ServerPreemptions), 10)
	case colStatus:
		return append(dst, r.Status...)
	case colHTTPStatus:
		return strconv.AppendInt(dst, int64(r.HTTPStatus), 10)
	case colError:
		return append(dst, r.Error...)
	case colRequestID:
		return append(dst, r.RequestID...)
	}
	return dst
}

func appendInts64(dst []byte, v []int64, sep byte) []byte {
	for i, x := range v {
		if i > 0 {
			dst = append(dst, sep)
		}
		dst = strconv.AppendInt(dst, x, 10)
	}
	return dst
}

func appendInts32(dst []byte, v []int32, sep byte) []byte {
	for i, x := range v {
		if i > 0 {
			dst = append(dst, sep)
		}
		dst = strconv.AppendInt(dst, int64(x), 10)
	}
	return dst
}

// setText sets column col of r from CSV cell text (see appendText). Strings
// go through intern so repeated labels share one allocation.
func (r *Record) setText(col int, s string, intern func(string) string) error {
	var err error
	switch col {
	case colSeq:
		r.Seq, err = parseInt64(s)
	case colArrivalNs:
		r.ArrivalNs, err = parseInt64(s)
	case colSession:
		r.Session, err = parseInt64(s)
	case colTurn:
		r.Turn, err = parseInt32(s)
	case colCategory:
		r.Category = intern(s)
	case colPrefixTokens:
		r.PrefixTokens, err = parseInt32(s)
	case colPrefixBlocks:
		r.PrefixBlocks, err = parseList64(r.PrefixBlocks[:0], s)
	case colInputTokens:
		r.InputTokens, err = parseInt32(s)
	case colOutputTokens:
		r.OutputTokens, err = parseInt32(s)
	case colModel:
		r.Model = intern(s)
	case colAPI:
		r.API = intern(s)
	case colClass:
		r.Class = intern(s)
	case colRun:
		r.Run = intern(s)
	case colScheduledNs:
		r.ScheduledNs, err = parseInt64(s)
	case colSentNs:
		r.SentNs, err = parseInt64(s)
	case colFirstTokenNs:
		r.FirstTokenNs, err = parseInt64(s)
	case colLastTokenNs:
		r.LastTokenNs, err = parseInt64(s)
	case colChunkNs:
		r.ChunkNs, err = parseList64(r.ChunkNs[:0], s)
	case colChunkTokens:
		r.ChunkTokens, err = parseList32(r.ChunkTokens[:0], s)
	case colServerPromptTokens:
		r.ServerPromptTokens, err = parseInt32(s)
	case colServerOutputTokens:
		r.ServerOutputTokens, err = parseInt32(s)
	case colServerCachedTokens:
		r.ServerCachedTokens, err = parseInt32(s)
	case colServerQueueNs:
		r.ServerQueueNs, err = parseInt64(s)
	case colServerPrefillNs:
		r.ServerPrefillNs, err = parseInt64(s)
	case colServerDecodeNs:
		r.ServerDecodeNs, err = parseInt64(s)
	case colServerPreemptions:
		r.ServerPreemptions, err = parseInt32(s)
	case colStatus:
		r.Status = intern(s)
	case colHTTPStatus:
		r.HTTPStatus, err = parseInt32(s)
	case colError:
		r.Error = intern(s)
	case colRequestID:
		r.RequestID = s
	}
	if err != nil {
		return fmt.Errorf("column %s: %w", Columns[col], err)
	}
	return nil
}

func parseInt64(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an integer")
	}
	return n, nil
}

func parseInt32(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("not a 32-bit integer")
	}
	return int32(n), nil
}

// parseList64 parses space- or semicolon-separated integers.
func parseList64(dst []int64, s string) ([]int64, error) {
	for f := range fieldsSeq(s) {
		n, err := parseInt64(f)
		if err != nil {
			return nil, err
		}
		dst = append(dst, n)
	}
	if len(dst) == 0 {
		return nil, nil
	}
	return dst, nil
}

func parseList32(dst []int32, s string) ([]int32, error) {
	for f := range fieldsSeq(s) {
		n, err := parseInt32(f)
		if err != nil {
			return nil, err
		}
		dst = append(dst, n)
	}
	if len(dst) == 0 {
		return nil, nil
	}
	return dst, nil
}

// fieldsSeq yields the non-empty pieces of s separated by spaces or
// semicolons.
func fieldsSeq(s string) func(func(string) bool) {
	return func(yield func(string) bool) {
		start := -1
		for i := 0; i <= len(s); i++ {
			if i == len(s) || s[i] == ' ' || s[i] == ';' {
				if start >= 0 {
					if !yield(s[start:i]) {
						return
					}
					start = -1
				}
				continue
			}
			if start < 0 {
				start = i
			}
		}
	}
}
