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

// maxFuncLines bounds a function's body, the lines between its braces:
// past it a function holds more than one step and its steps want names
// (Plan.Run reads set up, start the clock, send, finish; a command maps
// flags to options and calls a function for the body).
const maxFuncLines = 120

// longFunctionsBeingSplit are the functions over maxFuncLines that are
// being split by their steps in work under way elsewhere (package
// directory and function, with its receiver type). An entry whose
// function is back within the bound fails the test: remove it.
var longFunctionsBeingSplit = map[string]bool{}

// TestFunctionsAreShort keeps the body of every function (and method) of
// the module, tests aside, within maxFuncLines: it walks the tree (not
// testdata, node_modules, hidden directories or other modules).
func TestFunctionsAreShort(t *testing.T) {
	seen := map[string]bool{}
	files := parseModule(t, otherModule, func(fset *token.FileSet, path, dir string, f *ast.File) {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			lines := fset.Position(fd.Body.Rbrace).Line - fset.Position(fd.Body.Lbrace).Line - 1
			if lines <= maxFuncLines {
				continue
			}
			name := dir + "." + funcName(fd)
			if longFunctionsBeingSplit[name] {
				seen[name] = true
				continue
			}
			t.Errorf("%s:%d: %s has a body of %d lines, over %d: give its steps names", path, fset.Position(fd.Pos()).Line, funcName(fd), lines, maxFuncLines)
		}
	})
	if files < 100 {
		t.Fatalf("read %d Go files: not the module", files)
	}
	for name := range longFunctionsBeingSplit {
		if !seen[name] {
			t.Errorf("%s is within %d lines now (or gone): remove it from longFunctionsBeingSplit", name, maxFuncLines)
		}
	}
}

// parseModule parses every Go file of the module but tests, below the
// repository root, and calls visit with each (its path, its directory
// relative to the root, slash-separated). It does not enter hidden
// directories, testdata, node_modules or a directory skip names. It
// returns how many files it parsed.
func parseModule(t *testing.T, skip func(path, name string) bool, visit func(fset *token.FileSet, path, dir string, f *ast.File)) int {
	t.Helper()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || skip(path, n)) {
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
		files++
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		visit(fset, path, filepath.ToSlash(rel), f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// otherModule reports whether the directory at path holds a module of its
// own (deploy/k8s's manifest tests).
func otherModule(path, _ string) bool {
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// funcName is a function's name, a method's with its receiver type
// ("Report.windows").
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// TestLibrariesNameOptionsStructurally keeps the libraries from writing an
// option's name ("Options.RateScale", "FitOptions.TempDir") into an
// error's text, where the CLI could say it as a flag only by rewriting
// text: an error about an option is a traces.OptionError (its option
// argument names it), and advice that names one wraps a traces.OptionRef
// with %w. It checks the string literals of fmt.Errorf and errors.New
// calls, the format of OptionErrorf and of the packages' optionErr
// helpers, and every Error() method; doc comments and other strings are
// free to name options. And no library string literal at all (an error,
// a note, advice, a command) says one of tokentrace's flags: text that
// names an option holds it as a traces.OptionRef (or a command as a
// traces.Command) in a traces.Text, which the CLI says with its flags;
// other tools' flags, which tokentrace's text quotes, are listed below.
func TestLibrariesNameOptionsStructurally(t *testing.T) {
	optionName := regexp.MustCompile(`Options\.[A-Z]`)
	flagText := regexp.MustCompile(`(^|[^\w-])(--[a-z][a-z0-9.-]*)`)
	othersFlags := map[string]string{
		"--enable-prompt-tokens-details": "vLLM's: it reports cached prompt tokens (analyze's prefix cache)",
		"--enable-per-request-metrics":   "vLLM's: it reports per-request server timings (sim/twin's fit notes)",
		"--custom-dataset-type":          "AIPerf's: the dataset type of an export (formats)",
		"--data":                         "GuideLLM's: the trace an export feeds it (formats)",
		"--dataset-name":                 "vllm bench serve's (formats)",
		"--timed-trace-sec-multiplier":   "vllm bench serve's (formats)",
		"--timed-trace-chunk-hash-size":  "vllm bench serve's (formats)",
		"--config.file":                  "Prometheus' (internal/promtest starts one)",
		"--storage.tsdb.path":            "Prometheus' (internal/promtest)",
		"--web.listen-address":           "Prometheus' (internal/promtest)",
		"--log.level":                    "Prometheus' (internal/promtest)",
	}
	flagsSeen := 0
	checked := parseModule(t, func(_, name string) bool { return name == "cmd" }, func(fset *token.FileSet, _, _ string, f *ast.File) {
		if f.Name.Name != "main" { // a program says its own flags
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				for _, m := range flagText.FindAllStringSubmatch(lit.Value, -1) {
					flagsSeen++
					if _, other := othersFlags[m[2]]; !other {
						t.Errorf("%s: %s says the flag %s: name the option in a traces.Text (traces.Textf with a traces.OptionRef, or a traces.Command) for the CLI to say", fset.Position(lit.Pos()), lit.Value, m[2])
					}
				}
				return true
			})
		}
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
	})
	if checked < 100 || flagsSeen < len(othersFlags) {
		t.Fatalf("checked %d library files, %d flags in their strings; the walk missed the module", checked, flagsSeen)
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
