package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOptionsConvention checks the options convention ARCHITECTURE.md
// states, in every library package: each exported options struct (a type
// named Options or XOptions, and synth's Thresholds) has its constructor
// (DefaultOptions, DefaultXOptions, DefaultThresholds) in its package;
// every exported field's doc ends with what that constructor sets it to
// ("Defaults to X." or, for a group, "Default to X and Y."); and no
// package fills zero fields with defaults behind the caller's back (no
// withDefaults, WithDefaults or defaults method), so a typed zero is a
// value the library uses or its Validate refuses.
func TestOptionsConvention(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	type optionsType struct {
		pkg, name string
		pos       token.Position
	}
	var types []optionsType
	ctors := map[string]bool{} // pkg dir + "." + function name
	lastDefault := regexp.MustCompile(`Defaults? to .*$`)
	newSentence := regexp.MustCompile(`[.)] +[A-Z]`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "cmd" || n == "bench" || n == "deploy") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				switch name := decl.Name.Name; {
				case decl.Recv != nil && (name == "withDefaults" || name == "WithDefaults" || name == "defaults"):
					t.Errorf("%s: %s fills zero fields with defaults: give them in the constructor, and let Validate refuse a zero the library cannot use", fset.Position(decl.Pos()), name)
				case decl.Recv == nil && strings.HasPrefix(name, "Default") && decl.Type.Params.NumFields() == 0:
					ctors[dir+"."+name] = true
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					name := ts.Name.Name
					if !ok || !(strings.HasSuffix(name, "Options") || name == "Thresholds") {
						continue
					}
					types = append(types, optionsType{dir, name, fset.Position(ts.Pos())})
					for _, fld := range st.Fields.List {
						if len(fld.Names) == 0 || !fld.Names[0].IsExported() {
							continue // embedded: documented where it is declared
						}
						doc := strings.Join(strings.Fields(fld.Doc.Text()), " ")
						m := lastDefault.FindString(doc)
						if m == "" || newSentence.MatchString(m) {
							t.Errorf("%s: %s.%s: its doc must end with its default (\"Defaults to X.\"), the value the constructor sets", fset.Position(fld.Pos()), name, fld.Names[0].Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(types) < 15 {
		t.Fatalf("found %d options types; the walk from %s missed the module", len(types), root)
	}
	for _, ty := range types {
		ctor := "Default" + ty.name
		if ty.name == "Options" {
			ctor = "DefaultOptions"
		}
		if !ctors[ty.pkg+"."+ctor] {
			t.Errorf("%s: %s has no constructor %s() returning every default", ty.pos, ty.name, ctor)
		}
	}
}
