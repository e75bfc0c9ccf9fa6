package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPackageLayering checks the package graph that ARCHITECTURE.md
// promises, from the bottom up: traces and internal/* import no product;
// sim (with sim/engine) imports nothing but them; the four products
// (capture, synth, replay, analyze, with their subpackages) import those
// below them (sim included) and never each other; validate sits above
// them and is imported only by cmd; nothing but cmd imports cmd. Programs
// under bench/ may import any library.
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
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		checked++
		from := strings.TrimPrefix(p.ImportPath, mod)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			to := strings.TrimPrefix(imp, mod)
			if why := layerViolation(from, to); why != "" {
				t.Errorf("%s imports %s: %s", from, to, why)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("go list gave %d packages; want the module's", checked)
	}
}

// The layers of the module's packages, from the bottom.
const (
	layerBase     = iota // traces and internal/*: the contract and shared helpers
	layerSim             // sim and sim/engine: the simulator every product may run
	layerProduct         // capture, synth, replay, analyze
	layerValidate        // validate: wires the products
	layerCmd             // cmd: the CLI
	layerBench           // bench programs: any library
)

// layerOf is pkg's layer and, for a product, which one (its top
// directory).
func layerOf(pkg string) (int, string) {
	top, _, _ := strings.Cut(pkg, "/")
	switch top {
	case "sim":
		return layerSim, top
	case "capture", "synth", "replay", "analyze":
		return layerProduct, top
	case "validate":
		return layerValidate, top
	case "cmd":
		return layerCmd, top
	case "bench":
		return layerBench, top
	}
	return layerBase, ""
}

// layerViolation says why from must not import to ("" when it may): a
// package imports only from layers below its own, or from its own
// product; nothing but cmd imports cmd.
func layerViolation(from, to string) string {
	fl, fp := layerOf(from)
	tl, tp := layerOf(to)
	switch {
	case tl == layerCmd && fl != layerCmd:
		return "nothing but cmd imports cmd"
	case fl == layerBench:
		return ""
	case tl == layerBench:
		return "bench holds programs, not libraries"
	case fl == tl && (fl != layerProduct || fp == tp):
		return ""
	case tl < fl:
		return ""
	case fl == layerProduct && tl == layerProduct:
		return fmt.Sprintf("the products never import each other (%s and %s)", fp, tp)
	}
	return fmt.Sprintf("%s sits below %s", layerName(fl, fp), layerName(tl, tp))
}

func layerName(l int, product string) string {
	switch l {
	case layerBase:
		return "a package below the products (traces, internal)"
	case layerSim:
		return "the simulator (sim)"
	}
	return product
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

// TestFunctionsAreShort keeps every function (and method) of cmd/tokentrace,
// replay and validate, tests aside, within maxFuncLines.
func TestFunctionsAreShort(t *testing.T) {
	for _, dir := range []string{".", filepath.Join("..", "..", "replay"), filepath.Join("..", "..", "validate")} {
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

// TestLibrariesNameOptionsStructurally keeps the libraries from writing an
// option's name ("Options.RateScale", "FitOptions.TempDir") into an
// error's text, where the CLI could say it as a flag only by rewriting
// text: an error about an option is a traces.OptionError (its option
// argument names it), and advice that names one wraps a traces.OptionRef
// with %w. It checks the string literals of fmt.Errorf and errors.New
// calls, the format of OptionErrorf and of the packages' optionErr
// helpers, and every Error() method; doc comments and other strings are
// free to name options.
func TestLibrariesNameOptionsStructurally(t *testing.T) {
	optionName := regexp.MustCompile(`Options\.[A-Z]`)
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "cmd") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		check := func(n ast.Node, intoCalls bool) {
			ast.Inspect(n, func(m ast.Node) bool {
				if _, ok := m.(*ast.CallExpr); ok && !intoCalls {
					return false // a call among the arguments is checked as itself
				}
				if lit, ok := m.(*ast.BasicLit); ok && lit.Kind == token.STRING && optionName.MatchString(lit.Value) {
					t.Errorf("%s: %s names an option in an error's text: make it a traces.OptionError, or wrap a traces.OptionRef with %%w", fset.Position(lit.Pos()), lit.Value)
				}
				return true
			})
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Name.Name == "Error" && n.Recv != nil && n.Type.Params.NumFields() == 0 && n.Body != nil {
					check(n.Body, true)
				}
			case *ast.CallExpr:
				skip := -1 // the argument that names the option
				switch callee(n.Fun) {
				case "fmt.Errorf", "errors.New":
				case "OptionErrorf":
					skip = 1
				case "optionErr":
					skip = 0
				default:
					return true
				}
				for i, a := range n.Args {
					if i != skip {
						check(a, false)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d library files; the walk from %s missed the module", checked, root)
	}
}

// callee is a call's function as written: "fmt.Errorf", or the name alone
// for OptionErrorf (traces.OptionErrorf, or OptionErrorf inside traces) and
// plain functions.
func callee(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		if f.Sel.Name == "OptionErrorf" {
			return f.Sel.Name
		}
		if x, ok := f.X.(*ast.Ident); ok {
			return x.Name + "." + f.Sel.Name
		}
	}
	return ""
}
