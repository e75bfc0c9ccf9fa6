//go:build unix

package analyze

import (
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// chromiumBinary is Debian's chromium (or chromium-browser elsewhere); ""
// when neither is installed.
func chromiumBinary() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshot renders the page file in headless Chromium at 1000 × 2600
// pixels and decodes the PNG. Chromium runs in its own process group,
// killed when the call returns or its minute is up.
func screenshot(t *testing.T, bin, page string) image.Image {
	t.Helper()
	dir := t.TempDir()
	shot := filepath.Join(dir, "page.png")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot, "--window-size=1000,2600", "file://"+page)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("chromium did not finish in a minute: %s", out)
	}
	f, ferr := os.Open(shot)
	if ferr != nil {
		t.Fatalf("chromium wrote no screenshot (%v): %v\n%s", err, ferr, out)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	return img
}

// nearColour says whether c is col, give or take a few levels per channel
// (colour management, antialiasing).
func nearColour(c color.Color, col color.RGBA) bool {
	r, g, b, _ := c.RGBA()
	d := func(x uint32, y uint8) bool { return abs(float64(x>>8)-float64(y)) <= 8 }
	return d(r, col.R) && d(g, col.G) && d(b, col.B)
}

// waterfallBars counts the waterfall's bars in img: stacks of at least
// three pixel rows where a run of the queue colour is followed on the same
// row, a few pixels on (past a prefill sliver), by a run of the decode
// colour, as each tail request's bar is drawn. The attribution charts use
// the same colours, stacked vertically, never side by side on a row.
func waterfallBars(img image.Image) int {
	const minRun, maxGap = 15, 8
	queue, decode := compColors[cQueue].(color.RGBA), compColors[cDecode].(color.RGBA)
	b := img.Bounds()
	row := func(y int) bool {
		run := 0
		for x := b.Min.X; x < b.Max.X; x++ {
			if nearColour(img.At(x, y), queue) {
				run++
				continue
			}
			if run >= minRun {
				for g := x; g < min(x+maxGap, b.Max.X-minRun); g++ {
					d := 0
					for d < minRun && nearColour(img.At(g+d, y), decode) {
						d++
					}
					if d == minRun {
						return true
					}
				}
			}
			run = 0
		}
		return false
	}
	bars, stack := 0, 0
	for y := b.Min.Y; y <= b.Max.Y; y++ {
		if y < b.Max.Y && row(y) {
			stack++
			continue
		}
		if stack >= 3 {
			bars++
		}
		stack = 0
	}
	return bars
}

// TestHTMLRendersInChromium writes the incident run's report, has headless
// Chromium screenshot it, and checks that the page rendered: not blank
// (many colours, a good part of the pixels not white), and the tail
// waterfall's bars are on it.
func TestHTMLRendersInChromium(t *testing.T) {
	bin := chromiumBinary()
	if bin == "" {
		t.Skip("chromium is not installed (Debian package chromium; .ci/run installs it): the headless rendering check is skipped")
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(page, []byte(htmlOf(t, incidentReport(t, true))), 0o644); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, bin, page)
	b := img.Bounds()
	if b.Dx() != 1000 || b.Dy() != 2600 {
		t.Errorf("screenshot is %v, want 1000 × 2600", b.Size())
	}
	colours := map[color.RGBA]bool{}
	ink := 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), 0xff}
			colours[c] = true
			if c.R < 0xf0 || c.G < 0xf0 || c.B < 0xf0 {
				ink++
			}
		}
	}
	if frac := float64(ink) / float64(b.Dx()*b.Dy()/4); len(colours) < 100 || frac < 0.03 {
		t.Errorf("the page looks blank: %d colours, %.1f%% of the pixels not white", len(colours), 100*frac)
	}
	// The incident run's tail is 13 requests, most of them queued, then
	// decoded (11 show both runs at 1000 pixels wide).
	n := waterfallBars(img)
	t.Logf("%d waterfall bars on the screenshot", n)
	if n < 8 {
		t.Errorf("the screenshot shows %d waterfall bars (queue then decode on one row), want most of the 13 tail requests'", n)
	}
}
