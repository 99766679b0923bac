package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/event"
)

// chromiumPath finds headless Chromium (CI installs Debian's chromium). It
// fails when CI is set and Chromium is missing, and skips otherwise.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (.ci/run installs Debian's chromium package)")
	}
	t.Skip("chromium not installed; the HTML report's browser test needs it (apt-get install chromium)")
	return ""
}

// chromium runs headless Chromium with no network side channels and a
// throw-away profile.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, chromiumPath(t), append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// The HTML report of the fix-failing-test example renders in a real
// browser: one timeline row per iteration, and a screenshot that is not a
// blank page.
func TestHTMLReportRendersInChromium(t *testing.T) {
	chromiumPath(t)
	wd := prepareFixture(t)
	code, out, errOut := captureConfigCLI(t, "run", "../../examples/fix-failing-test", "--workdir", wd, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("run exit %d\n%s\n%s", code, out, errOut)
	}
	var res event.RunResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if code, _, errOut := captureConfigCLI(t, "report", res.RunID, "--workdir", wd, "--html", "-o", page); code != 0 {
		t.Fatalf("report exit %d: %s", code, errOut)
	}
	url := "file://" + page

	dom := string(chromium(t, "--dump-dom", url))
	if n := strings.Count(dom, `<li class="timeline-row"`); n != res.Iterations || n != 3 {
		t.Fatalf("rendered DOM has %d timeline rows, want %d", n, res.Iterations)
	}
	for _, want := range []string{"COMPLETED", "pattern test-failed", "pattern git-dirty", "<svg class=\"chart\"", "<details"} {
		if !strings.Contains(dom, want) {
			t.Fatalf("rendered DOM lacks %q", want)
		}
	}

	shot := filepath.Join(t.TempDir(), "report.png")
	chromium(t, "--window-size=1200,900", "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if n := distinctColours(img, 10); n < 10 {
		t.Fatalf("screenshot has %d distinct colours: the page rendered blank", n)
	}
}

// distinctColours counts the colours of img, sampling every stride-th
// pixel in each direction.
func distinctColours(img image.Image, stride int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += stride {
		for x := b.Min.X; x < b.Max.X; x += stride {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
		}
	}
	return len(seen)
}

// A blank (single colour) image is what the screenshot check catches.
func TestDistinctColoursCatchesBlankPage(t *testing.T) {
	blank := image.NewRGBA(image.Rect(0, 0, 200, 200))
	if n := distinctColours(blank, 10); n != 1 {
		t.Fatalf("blank image: %d colours", n)
	}
}
