package traces

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/internal/golden"
)

// TestSchemaTable: every column of the table reaches its own struct field,
// with the field's type, and a fresh record holds every column's default.
func TestSchemaTable(t *testing.T) {
	typ := reflect.TypeFor[Record]()
	if len(schema) != typ.NumField() {
		t.Fatalf("%d columns for %d fields", len(schema), typ.NumField())
	}
	for i := range schema {
		c := &schema[i]
		var r Record
		v := reflect.ValueOf(&r).Elem().Field(i)
		switch c.kind {
		case kindInt64:
			*c.int64p(&r) = 42
			if v.Int() != 42 {
				t.Errorf("%s: int64 offset reaches another field", c.name)
			}
		case kindInt32:
			*c.int32p(&r) = 42
			if v.Int() != 42 {
				t.Errorf("%s: int32 offset reaches another field", c.name)
			}
		case kindString:
			*c.strp(&r) = "x"
			if v.String() != "x" {
				t.Errorf("%s: string offset reaches another field", c.name)
			}
		case kindList64:
			*c.list64p(&r) = []int64{7}
			if v.Len() != 1 {
				t.Errorf("%s: list offset reaches another field", c.name)
			}
		case kindList32:
			*c.list32p(&r) = []int32{7}
			if v.Len() != 1 {
				t.Errorf("%s: list offset reaches another field", c.name)
			}
		default:
			t.Errorf("%s: no kind", c.name)
		}
		if fresh := NewRecord(); !c.isDefault(&fresh) {
			t.Errorf("%s: NewRecord does not hold the column's default", c.name)
		}
		if c.always && !c.request {
			t.Errorf("%s: an always-written column must be a request column", c.name)
		}
	}
}

// TestSchemaRejectsUnknownTags: a field whose type or trace tag no codec
// handles stops the program at start, not at the first file.
func TestSchemaRejectsUnknownTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  reflect.Type
	}{
		{"a float column has no codec", reflect.TypeFor[struct {
			X float64 `parquet:"x"`
		}]()},
		{"a misspelt role is refused", reflect.TypeFor[struct {
			X int64 `parquet:"x" trace:"requets"`
		}]()},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			schemaOf(tc.typ)
		}()
	}
}

const (
	docPath     = "../docs/schema.md"
	docBegin    = "<!-- columns: generated from traces.Record by `go test ./traces -run TestSchemaDoc -update` -->\n"
	docEnd      = "<!-- end of columns -->\n"
	recordSrc   = "record.go"
	docTableTop = "| column | type | role | meaning | absent / default |\n|---|---|---|---|---|\n"
)

// TestSchemaDoc: the column table in docs/schema.md is the one generated
// from Record's fields, tags and comments (-update rewrites it).
func TestSchemaDoc(t *testing.T) {
	comments := fieldComments(t)
	var b strings.Builder
	b.WriteString(docTableTop)
	for _, c := range schema {
		role := "outcome"
		if c.request {
			role = "request"
		}
		def := "0"
		switch {
		case c.kind == kindString:
			def = `""`
		case c.kind == kindList64 || c.kind == kindList32:
			def = "empty"
		case c.absent == NotReported:
			def = "−1 (not reported)"
		}
		b.WriteString("| `" + c.name + "` | " + kindNames[c.kind] + " | " + role + " | " + comments[c.field] + " | " + def + " |\n")
	}
	table := b.String()
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, docBegin), strings.Index(s, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: markers %q and %q not found", docPath, docBegin, docEnd)
	}
	current := s[i+len(docBegin) : j]
	if golden.Update() {
		golden.Write(t, docPath, []byte(s[:i+len(docBegin)]+table+s[j:]))
		return
	}
	if current != table {
		t.Errorf("%s: column table is stale; run go test ./traces -run TestSchemaDoc -update\ngot:\n%s\nwant:\n%s", docPath, current, table)
	}
}

// fieldComments returns each Record field's doc comment as one line, with
// the leading "Name is" dropped.
func fieldComments(t *testing.T) map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), recordSrc, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Record" {
			return true
		}
		for _, fld := range ts.Type.(*ast.StructType).Fields.List {
			name := fld.Names[0].Name
			text := strings.Join(strings.Fields(fld.Doc.Text()), " ")
			for _, verb := range []string{" is ", " are "} {
				text = strings.TrimPrefix(text, name+verb)
			}
			text = strings.TrimSuffix(text, ".")
			out[name] = strings.ReplaceAll(text, "|", "\\|")
		}
		return false
	})
	return out
}
