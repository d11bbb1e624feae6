package main

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/noisysim/noisysim/internal/runlock"
	"github.com/noisysim/noisysim/reports"
)

// chromium finds Debian's headless Chromium, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("skipping: chromium not installed (Debian: apt-get install chromium)")
	return ""
}

// TestReportHTMLInBrowser runs a short real scenario with --out, renders
// its report.html in headless Chromium and checks what the browser made
// of it: every expected figure with a drawn plot per configuration (or a
// panel saying why it has none), the assertions, and a screenshot that is
// not blank (it shows the plots' colours). Then noisysim report
// --html renders the same page again from report.json alone.
func TestReportHTMLInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: end-to-end scenario run in -short mode")
	}
	needPostgres(t)
	browser := chromium(t)
	bin := noisysimBinary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cmd := exec.Command(bin, "run", "--no-progress", "--allow-concurrent", "--out", out, "testdata/html-short.yaml")
	cmd.Env = append(os.Environ(), runlock.EnvPath+"="+filepath.Join(dir, "lock"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != exitAssertion {
		t.Fatalf("noisysim run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	page := filepath.Join(out, reports.HTMLFile)
	if !strings.Contains(stdout.String(), "report.html: "+page+"\n") {
		t.Errorf("the terminal does not name %s:\n%s", page, stdout.String())
	}

	dom, img := browse(t, browser, page)
	got := figureSections(dom)
	// Every figure, per configuration: naive has no limiter.
	for _, want := range []struct {
		fig  string
		svgs int
	}{{"latency", 2}, {"db_time", 2}, {"limiter", 1}, {"rejections", 1}, {"writer", 2}} {
		sec, ok := got[want.fig]
		if !ok {
			t.Errorf("report.html has no figure %s", want.fig)
			continue
		}
		if n := strings.Count(sec, "<svg"); n != want.svgs {
			t.Errorf("figure %s: %d plots, want %d", want.fig, n, want.svgs)
		}
		if n := drawnLines(sec); n < want.svgs {
			t.Errorf("figure %s: %d drawn lines, want at least one per plot", want.fig, n)
		}
	}
	if _, ok := got["nodes"]; ok {
		t.Errorf("report.html of a one-node run has a load-per-node figure")
	}
	if !strings.Contains(got["limiter"], "naive: no limiter in this configuration") {
		t.Errorf("the limiter figure does not say naive has no limiter")
	}
	for _, s := range []string{`id="assertions"`, "quiet_p99", "schedule hash", "terminate_sessions"} {
		if !strings.Contains(dom, s) {
			t.Errorf("report.html lacks %q", s)
		}
	}
	checkScreenshot(t, img)

	// noisysim report --html renders the same page from report.json.
	again := filepath.Join(dir, "again.html")
	if b, err := exec.Command(bin, "report", filepath.Join(out, reports.JSONFile), "--html", "-o", again).CombinedOutput(); err != nil {
		t.Fatalf("noisysim report --html: %v\n%s", err, b)
	}
	a, _ := os.ReadFile(page)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Errorf("noisysim report --html does not render the page run --out wrote")
	}
}

// browse renders page in headless Chromium: the DOM as the browser built
// it, and a screenshot of the page's top 1300 × 2600 pixels (kept where
// NOISYSIM_KEEP_SCREENSHOT names a directory, as <page's scenario>.png).
func browse(t *testing.T, browser, page string) (string, image.Image) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir=" + filepath.Join(dir, "profile")}
	dom, err := exec.Command(browser, append(args, "--dump-dom", "file://"+page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	shot := filepath.Join(dir, "report.png")
	if b, err := exec.Command(browser, append(args, "--window-size=1300,2600", "--screenshot="+shot, "file://"+page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if keep := os.Getenv("NOISYSIM_KEEP_SCREENSHOT"); keep != "" {
		os.WriteFile(filepath.Join(keep, t.Name()+".png"), raw, 0o644)
	}
	return string(dom), img
}

// figureSections splits a report.html DOM by figure: its id (latency,
// db_time, …) to the markup from its element to the next figure's.
func figureSections(dom string) map[string]string {
	figs := regexp.MustCompile(`id="fig-([a-z_]+)"`).FindAllStringSubmatchIndex(dom, -1)
	got := map[string]string{}
	for i, m := range figs {
		end := len(dom)
		if i+1 < len(figs) {
			end = figs[i+1][0]
		}
		got[dom[m[2]:m[3]]] = dom[m[0]:end]
	}
	return got
}

// drawnLines counts a figure's drawn lines: open paths of two points or
// more stroked in one of the plots' line colours (the axes and ticks are
// black, the grid grey, the phases' bands closed, the actions' marks dark
// red).
func drawnLines(sec string) int {
	return len(drawnLine.FindAllString(sec, -1))
}

var drawnLine = regexp.MustCompile(`(?i)<path d="M[^"Z]*L[^"Z]*" style="[^"]*stroke:#(?:1f77b4|d62728|2ca02c|ff7f0e|9467bd|8c564b|e377c2|7f7f7f);`)

// checkScreenshot fails unless img shows a page with plots: not blank, and
// the plots' first line colour drawn.
func checkScreenshot(t *testing.T, img image.Image) {
	t.Helper()
	white, blue := pixels(img)
	total := img.Bounds().Dx() * img.Bounds().Dy()
	if white > total*98/100 {
		t.Errorf("screenshot is blank: %d of %d pixels white", white, total)
	}
	if blue < 200 {
		t.Errorf("screenshot shows %d pixels of the plots' first line colour, want a drawn line", blue)
	}
}

// pixels counts an image's white pixels and those of the plots' first
// line colour (#1f77b4, give or take antialiasing).
func pixels(img image.Image) (white, blue int) {
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			r, g, b = r>>8, g>>8, b>>8
			if r > 250 && g > 250 && b > 250 {
				white++
			}
			if near(r, 0x1f) && near(g, 0x77) && near(b, 0xb4) {
				blue++
			}
		}
	}
	return white, blue
}

func near(v, want uint32) bool { return v+24 >= want && v <= want+24 }

// TestReportCommand: noisysim report --html writes the page beside
// report.json, refuses to overwrite it without --force, and answers a
// file that is no report.json with exit 2.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, reports.JSONFile)
	r := &reports.Report{Scenario: "s", Seed: 1, ScheduleHash: "abc", Backend: "local single",
		Configurations: []reports.Configuration{{Name: "naive", Passed: true}}}
	var buf bytes.Buffer
	if err := reports.WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(js, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, reports.HTMLFile)
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := realMain(append([]string{"report"}, args...), &out, &errOut)
		return code, out.String() + errOut.String()
	}
	if code, out := run(js, "--html"); code != exitOK || !strings.Contains(out, page) {
		t.Fatalf("report --html: exit %d, %s", code, out)
	}
	b, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(b), "abc") {
		t.Fatalf("page: %v, schedule hash missing", err)
	}
	if code, out := run(js, "--html"); code != exitUsage || !strings.Contains(out, "--force") {
		t.Errorf("second report --html: exit %d, %s; want 2 naming --force", code, out)
	}
	if code, out := run(js, "--html", "--force"); code != exitOK {
		t.Errorf("report --html --force: exit %d, %s", code, out)
	}
	if code, _ := run(js); code != exitUsage {
		t.Errorf("report without --html: exit %d, want 2", code)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema_version": 1}`), 0o644)
	if code, out := run(bad, "--html", "-o", filepath.Join(dir, "x.html")); code != exitUsage || !strings.Contains(out, "schema_version 1") {
		t.Errorf("old report: exit %d, %s; want 2 naming schema_version", code, out)
	}
	// What a new user types by mistake: each exit 2 with a hint, nothing written.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{dir, "--html"}, "is a directory: give the report.json in it (" + js + ")"},
		{[]string{js, "--html", "-o", dir, "--force"}, "-o " + dir + " is a directory: give a file name in it"},
		{[]string{js, "--html", "-o", filepath.Join(dir, "no", "x.html")}, "no directory " + filepath.Join(dir, "no")},
		{[]string{js, bad, "--html"}, "want one report.json, got 2 arguments"},
	} {
		if code, out := run(c.args...); code != exitUsage || !strings.Contains(out, c.want) {
			t.Errorf("report %q: exit %d, %s; want 2 and %q", c.args, code, out, c.want)
		}
	}
}
