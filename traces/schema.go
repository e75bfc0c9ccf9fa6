package traces

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tokentrace/tokentrace/internal/jsonlex"
)

// The column table is derived once from Record's fields and tags, so a
// column is declared in one place and every codec walks the same table.
// Fields are reached by offset: the codecs are hot loops, and the table test
// (TestSchemaTable) checks every offset against the struct.

// kind is a column's value type.
type kind uint8

const (
	kindInt64 kind = iota + 1
	kindInt32
	kindString
	kindList64
	kindList32
)

var kindNames = map[kind]string{kindInt64: "int64", kindInt32: "int32", kindString: "string", kindList64: "list<int64>", kindList32: "list<int32>"}

// column is one column of the schema.
type column struct {
	name    string
	field   string // Go field name
	kind    kind
	label   bool // dictionary-encoded string: decoders intern it
	request bool // a request column (CSV writes it even at its default)
	always  bool // JSONL writes it even at its default
	absent  int64
	offset  uintptr
	jsonKey string // `,"name":`
}

// schema is the column table, in Columns order.
var schema = schemaOf(reflect.TypeFor[Record]())

// Columns lists every column name in schema order: the Parquet column names,
// the JSON keys and the CSV header.
var Columns = func() []string {
	names := make([]string, len(schema))
	for i, c := range schema {
		names[i] = c.name
	}
	return names
}()

// numColumns is len(Columns).
var numColumns = len(schema)

// columnIndex maps a column name to its index in Columns.
var columnIndex = func() map[string]int {
	m := make(map[string]int, len(schema))
	for i, c := range schema {
		m[c.name] = i
	}
	return m
}()

// schemaOf builds the column table of t's fields; it panics on a tag or
// type no codec handles, which TestSchemaTable catches before a release.
func schemaOf(t reflect.Type) []column {
	cols := make([]column, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		pq := strings.Split(f.Tag.Get("parquet"), ",")
		c := column{name: pq[0], field: f.Name, label: slices.Contains(pq[1:], "dict"), offset: f.Offset}
		c.jsonKey = `,"` + c.name + `":`
		switch f.Type {
		case reflect.TypeFor[int64]():
			c.kind = kindInt64
		case reflect.TypeFor[int32]():
			c.kind = kindInt32
		case reflect.TypeFor[string]():
			c.kind = kindString
		case reflect.TypeFor[[]int64]():
			c.kind = kindList64
		case reflect.TypeFor[[]int32]():
			c.kind = kindList32
		default:
			panic(fmt.Sprintf("traces: field %s: type %s has no codec", f.Name, f.Type))
		}
		for _, opt := range strings.Split(f.Tag.Get("trace"), ",") {
			switch opt {
			case "request":
				c.request = true
			case "always":
				c.request, c.always = true, true
			case "unreported":
				c.absent = NotReported
			case "outcome":
			default:
				panic(fmt.Sprintf("traces: field %s: unknown trace tag option %q", f.Name, opt))
			}
		}
		cols = append(cols, c)
	}
	return cols
}

func (c *column) int64p(r *Record) *int64 {
	return (*int64)(unsafe.Add(unsafe.Pointer(r), c.offset))
}

func (c *column) int32p(r *Record) *int32 {
	return (*int32)(unsafe.Add(unsafe.Pointer(r), c.offset))
}

func (c *column) strp(r *Record) *string {
	return (*string)(unsafe.Add(unsafe.Pointer(r), c.offset))
}

func (c *column) list64p(r *Record) *[]int64 {
	return (*[]int64)(unsafe.Add(unsafe.Pointer(r), c.offset))
}

func (c *column) list32p(r *Record) *[]int32 {
	return (*[]int32)(unsafe.Add(unsafe.Pointer(r), c.offset))
}

// isDefault reports whether r holds the column's value of a decoder's
// starting row (NewRecord), so text codecs may leave it out.
func (c *column) isDefault(r *Record) bool {
	switch c.kind {
	case kindInt64:
		return *c.int64p(r) == c.absent
	case kindInt32:
		return int64(*c.int32p(r)) == c.absent
	case kindString:
		return *c.strp(r) == ""
	case kindList64:
		return len(*c.list64p(r)) == 0
	default:
		return len(*c.list32p(r)) == 0
	}
}

// setAbsent sets a number column to its value when a file lacks it.
func (c *column) setAbsent(r *Record) {
	switch c.kind {
	case kindInt64:
		*c.int64p(r) = c.absent
	case kindInt32:
		*c.int32p(r) = int32(c.absent)
	}
}

// appendValue appends the column of r: numbers in decimal, lists as
// decimals joined by sep, strings raw or, with quote, as JSON strings.
func (c *column) appendValue(dst []byte, r *Record, sep byte, quote bool) []byte {
	switch c.kind {
	case kindInt64:
		return strconv.AppendInt(dst, *c.int64p(r), 10)
	case kindInt32:
		return strconv.AppendInt(dst, int64(*c.int32p(r)), 10)
	case kindString:
		if quote {
			return jsonlex.AppendString(dst, *c.strp(r))
		}
		return append(dst, *c.strp(r)...)
	case kindList64:
		return appendInts(dst, *c.list64p(r), sep)
	default:
		return appendInts(dst, *c.list32p(r), sep)
	}
}

func appendInts[T int32 | int64](dst []byte, v []T, sep byte) []byte {
	for i, x := range v {
		if i > 0 {
			dst = append(dst, sep)
		}
		dst = strconv.AppendInt(dst, int64(x), 10)
	}
	return dst
}

// setText sets the column of r from CSV cell text (see appendValue). Labels
// go through intern so repeated values share one allocation.
func (c *column) setText(r *Record, s string, intern func(string) string) error {
	var err *RowProblem
	switch c.kind {
	case kindInt64:
		*c.int64p(r), err = parseInt64(s)
	case kindInt32:
		*c.int32p(r), err = parseInt32(s)
	case kindString:
		if c.label {
			s = intern(s)
		}
		*c.strp(r) = s
	case kindList64:
		p := c.list64p(r)
		*p, err = parseList((*p)[:0], s, parseInt64)
	default:
		p := c.list32p(r)
		*p, err = parseList((*p)[:0], s, parseInt32)
	}
	return c.fault(err)
}

// fault names c as the column at fault in err, and keeps no problem a nil
// error (not a nil *RowProblem inside one).
func (c *column) fault(err *RowProblem) error {
	if err == nil {
		return nil
	}
	err.Column = c.name
	return err
}

// normalizeLists makes empty lists nil, so every codec reads back the same
// value for "no list".
func (r *Record) normalizeLists() {
	if len(r.PrefixBlocks) == 0 {
		r.PrefixBlocks = nil
	}
	if len(r.AfterSeqs) == 0 {
		r.AfterSeqs = nil
	}
	if len(r.ChunkNs) == 0 {
		r.ChunkNs = nil
	}
	if len(r.ChunkTokens) == 0 {
		r.ChunkTokens = nil
	}
}

func parseInt64(s string) (int64, *RowProblem) { return parseInt(s, 64) }

func parseInt32(s string) (int32, *RowProblem) {
	n, err := parseInt(s, 32)
	return int32(n), err
}

// parseList parses space- or semicolon-separated integers.
func parseList[T int32 | int64](dst []T, s string, parse func(string) (T, *RowProblem)) ([]T, *RowProblem) {
	for f := range fieldsSeq(s) {
		n, err := parse(f)
		if err != nil {
			err.Detail = "entry " + err.Detail
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
