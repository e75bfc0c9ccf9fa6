package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionStamped checks that a version stamped at link time
// (-X main.version, as the image build does) is what `version` prints.
func TestVersionStamped(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3-test"
	if so, _ := runMain(t, "version"); !strings.HasPrefix(so, "tokentrace v1.2.3-test (commit ") {
		t.Errorf("version printed %q", so)
	}
}

// TestVersionOneFormat checks that `version`, --version and -v print one
// line, the same, carrying the commit (they printed two formats, and
// neither named the commit).
func TestVersionOneFormat(t *testing.T) {
	want, _ := runMain(t, "version")
	if !strings.HasPrefix(want, "tokentrace ") || !strings.Contains(want, "(commit ") || !strings.Contains(want, "trace schema ") || strings.Count(want, "\n") != 1 {
		t.Errorf("version printed %q, want one line naming the commit and the trace schema", want)
	}
	for _, flag := range []string{"--version", "-v"} {
		if got, _ := runMain(t, flag); got != want {
			t.Errorf("%s printed %q, want what version prints, %q", flag, got, want)
		}
	}
}

// TestBuildVersionCommit checks where the commit comes from: Go's build
// info (vcs.revision, marked when the tree was dirty), else the commit
// stamped at link time, else "unknown".
func TestBuildVersionCommit(t *testing.T) {
	oldV, oldC := version, commit
	t.Cleanup(func() { version, commit = oldV, oldC })
	version, commit = "", ""
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		why              string
		bi               *debug.BuildInfo
		version, commit  string
		wantVer, wantRev string
	}{
		{"the build info's revision, marked modified", bi, "", "", "(devel)", "0123456789ab+modified"},
		{"a stamped version keeps the build info's revision", bi, "v1.2.3", "", "v1.2.3", "0123456789ab+modified"},
		{"a stamped commit where Go recorded none", &debug.BuildInfo{}, "v1.2.3", "fedcba9876543210", "v1.2.3", "fedcba987654"},
		{"no build info and nothing stamped", nil, "", "", "(devel)", "unknown"},
	} {
		version, commit = c.version, c.commit
		if v, r := buildVersion(c.bi); v != c.wantVer || r != c.wantRev {
			t.Errorf("%s: got %q, %q; want %q, %q", c.why, v, r, c.wantVer, c.wantRev)
		}
	}
}

// TestVersionOfGitBuild builds the CLI as `go install` from a clone does
// and checks that `version` names the clone's commit (Go records it in the
// build info, "+modified" for a dirty tree) instead of "(devel) (commit
// unknown)". Go records VCS information only where .git is a directory,
// so a git worktree or a tarball skips; -buildvcs=true overrides a
// GOFLAGS=-buildvcs=false set in the environment or go env.
func TestVersionOfGitBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		t.Skip("not a git clone (no .git directory: a worktree or a tarball), where Go records no commit")
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Skipf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	head := git("rev-parse", "HEAD")
	// The test binary's own flags, so the build reuses its compiled packages.
	bin := filepath.Join(t.TempDir(), "tokentrace")
	args := []string{"build", "-buildvcs=true", "-o", bin}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	build := exec.Command("go", append(args, "./cmd/tokentrace")...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dirty := git("status", "--porcelain") != ""
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "(commit " + head[:12]
	if dirty {
		want += "+modified"
	}
	if got := string(out); !strings.Contains(got, want+",") || strings.Contains(got, "(devel)") {
		t.Errorf("version of a build at %s (dirty %v) printed %q, want %q and a module version", head[:12], dirty, got, want)
	}
}
