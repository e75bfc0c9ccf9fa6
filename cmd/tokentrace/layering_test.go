package main

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageLayering checks the package graph that ARCHITECTURE.md
// promises: traces and internal/* import no product, the four products
// (capture, synth, replay, analyze, with their subpackages) never import
// each other, replay/sim imports nothing of replay, validate (above the
// products) is imported only by cmd, and nothing but cmd imports cmd.
func TestPackageLayering(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command(goBin, "list", "-deps=false", "-json", "github.com/tokentrace/tokentrace/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/tokentrace/tokentrace/"
	product := func(p string) string {
		p = strings.TrimPrefix(p, mod)
		for _, top := range []string{"capture", "synth", "replay", "analyze", "validate", "cmd"} {
			if p == top || strings.HasPrefix(p, top+"/") {
				return top
			}
		}
		return "" // traces, internal, bench, testdata, deploy: below the products
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		from := product(p.ImportPath)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			// The simulator is a product of its own inside replay: the
			// built-in target and the ground truth must not share code
			// with the client they judge.
			if strings.HasPrefix(p.ImportPath, mod+"replay/sim") && strings.HasPrefix(imp, mod+"replay") && !strings.HasPrefix(imp, mod+"replay/sim") {
				t.Errorf("%s imports %s: the simulator imports nothing of replay", strings.TrimPrefix(p.ImportPath, mod), strings.TrimPrefix(imp, mod))
			}
			to := product(imp)
			switch {
			case to == "" || to == from:
			case from == "cmd":
			case from == "validate" && to != "cmd":
				// validate sits above the products and wires them.
			case strings.HasPrefix(p.ImportPath, mod+"bench/"):
			default:
				t.Errorf("%s imports %s: %s must not depend on %s", strings.TrimPrefix(p.ImportPath, mod), strings.TrimPrefix(imp, mod), productName(from), to)
			}
		}
	}
}

func productName(p string) string {
	if p == "" {
		return "a package below the products"
	}
	return p
}

// TestCommandFilesAreThin keeps each command file a mapping of flags to
// options and a library call: none over 300 lines (domain logic belongs in
// the libraries).
func TestCommandFilesAreThin(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if lines := bytes.Count(b, []byte("\n")); lines > 300 {
			t.Errorf("%s has %d lines, over 300: move what is not flag mapping into a library", n, lines)
		}
	}
}

// maxFuncLines bounds a function of the CLI and of replay, from its func
// line to its closing brace: past it a function holds more than one step
// and its steps want names (Plan.Run reads set up, start the clock, send,
// finish; a command maps flags to options and calls a function for the
// body).
const maxFuncLines = 120

// TestFunctionsAreShort keeps every function (and method) of cmd/tokentrace
// and replay, tests aside, within maxFuncLines.
func TestFunctionsAreShort(t *testing.T) {
	for _, dir := range []string{".", filepath.Join("..", "..", "replay")} {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		fset := token.NewFileSet()
		for _, n := range names {
			if strings.HasSuffix(n, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, n, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				from, to := fset.Position(fd.Pos()), fset.Position(fd.End())
				if lines := to.Line - from.Line + 1; lines > maxFuncLines {
					t.Errorf("%s:%d: %s has %d lines, over %d: give its steps names", n, from.Line, fd.Name.Name, lines, maxFuncLines)
				}
			}
		}
	}
}
