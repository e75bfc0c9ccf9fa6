package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var (
	// mdLink is an inline link or image: [text](target) or ![alt](target "title").
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^\\s*(```|~~~)")
	// inlineCode is a code span, whose brackets are not links.
	inlineCode = regexp.MustCompile("`+[^`]*`+")
	// atxHeading is a Markdown heading line.
	atxHeading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// htmlAnchor is an explicit anchor, <a id="x"> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// linkText keeps the text of a link in a heading.
	linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// proseLines returns md's lines outside fenced code blocks, each with its
// line number.
func proseLines(md string) (lines []string, nums []int) {
	in := false
	for i, line := range strings.Split(md, "\n") {
		if fence.MatchString(line) {
			in = !in
			continue
		}
		if !in {
			lines, nums = append(lines, line), append(nums, i+1)
		}
	}
	return lines, nums
}

// githubAnchor is the anchor GitHub gives a heading: its text lowercased,
// every character but letters, digits, spaces, '-' and '_' dropped, spaces
// turned into '-'.
func githubAnchor(heading string) string {
	heading = linkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdAnchors returns the anchors a Markdown text defines: one per heading
// (a repeated one gets -1, -2, … as on GitHub) and every explicit HTML
// anchor.
func mdAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	lines, _ := proseLines(md)
	for _, line := range lines {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := githubAnchor(m[1])
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// urlScheme starts an absolute URL (https:, mailto:).
var urlScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// brokenLinks returns, for the Markdown file path, every relative link or
// image whose file does not exist and every #anchor its target does not
// define, as "LINE: TARGET: what is wrong". Absolute URLs are not fetched.
func brokenLinks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var broken []string
	// Each target's anchors, parsed once: the pages link one another (and
	// figures.md) hundreds of times.
	anchorsOf := map[string]map[string]bool{}
	lines, nums := proseLines(string(b))
	for i, line := range lines {
		for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if urlScheme.MatchString(target) {
				continue // https:, mailto:
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := path
			if file != "" {
				resolved = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
				if _, err := os.Stat(resolved); err != nil {
					broken = append(broken, strconv.Itoa(nums[i])+": "+target+": no file "+filepath.ToSlash(resolved))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(resolved, ".md") {
				broken = append(broken, strconv.Itoa(nums[i])+": "+target+": an anchor into a file that is not Markdown")
				continue
			}
			anchors, ok := anchorsOf[resolved]
			if !ok {
				md, err := os.ReadFile(resolved)
				if err != nil {
					t.Fatal(err)
				}
				anchors = mdAnchors(string(md))
				anchorsOf[resolved] = anchors
			}
			if !anchors[anchor] {
				broken = append(broken, strconv.Itoa(nums[i])+": "+target+": no heading with anchor #"+anchor+" in "+filepath.Base(resolved))
			}
		}
	}
	return broken
}

// TestDocsLinksResolve: every relative link and image in README.md,
// ARCHITECTURE.md and docs/*.md names a file that exists (relative to the
// file that links it, as GitHub resolves it), and every #anchor names a
// heading of its target by GitHub's rules.
func TestDocsLinksResolve(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"), filepath.Join("..", "..", "ARCHITECTURE.md"))
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		for _, b := range brokenLinks(t, f) {
			t.Errorf("%s:%s", filepath.Base(f), b)
		}
	}
}

// TestDocsLinkChecker: the checker itself, on GitHub's anchors and on links
// that must pass and fail.
func TestDocsLinkChecker(t *testing.T) {
	for heading, want := range map[string]string{
		"Closed sessions: think time, subagents, joins":        "closed-sessions-think-time-subagents-joins",
		"Distributed replay (`--shard`, `--start-at`, deploy)": "distributed-replay---shard---start-at-deploy",
		"`tokentrace capture`":                                 "tokentrace-capture",
		"Scale: a week of logs":                                "scale-a-week-of-logs",
		"p99 TTFT, [measured](figures.md)":                     "p99-ttft-measured",
		"snake_case Über 2.0":                                  "snake_case-über-20",
	} {
		if got := githubAnchor(heading); got != want {
			t.Errorf("anchor of %q = %q, want %q", heading, got, want)
		}
	}
	if a := mdAnchors("# Intro\n```\n# not a heading\n```\n## Intro\n<a id=\"custom\"></a>\n"); !a["intro"] || !a["intro-1"] || a["not-a-heading"] || !a["custom"] {
		t.Errorf("anchors %v: want intro, intro-1 and custom, not the fenced line", a)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.md":        "# Top\n\n## Part two\n",
		"sub/img.png": "png",
		"sub/b.md": "[ok](../a.md#part-two) ![ok](img.png) [ok](#here) [web](https://example.com/x#y)\n# Here\n" +
			"[bad file](img.png.missing) ![bad image](sub/img.png) [bad anchor](../a.md#part-3) [bad here](#nowhere)\n" +
			"`[in code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := brokenLinks(t, filepath.Join(dir, "sub", "b.md"))
	var targets []string
	for _, g := range got {
		targets = append(targets, strings.SplitN(g, ": ", 3)[1])
	}
	want := []string{"img.png.missing", "sub/img.png", "../a.md#part-3", "#nowhere"}
	if strings.Join(targets, " ") != strings.Join(want, " ") {
		t.Errorf("broken %q, want the targets %q", got, want)
	}
}
