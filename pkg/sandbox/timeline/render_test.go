package timeline

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rota-dev/rota/pkg/sandbox/report"
)

var day = time.Date(2026, 10, 19, 0, 0, 0, 0, time.FixedZone("", 7*3600))

// swapPage is a day of two GPUs changing hands at 08:00 and 18:00.
func swapPage() Page {
	r := NewRecorder()
	gpus := map[string]report.GPU{
		"n/gpu-0": {Node: "n", Name: "gpu-0", Model: "H100", UUID: "GPU-0"},
		"n/gpu-1": {Node: "n", Name: "gpu-1", Model: "H100", UUID: "GPU-1"},
	}
	hold := func(w string) map[string]report.Holder {
		return map[string]report.Holder{"n/gpu-0": {Workload: w}, "n/gpu-1": {Workload: w}}
	}
	r.Add(day, &report.State{GPUs: gpus, Holders: hold("serving/qwen")})
	r.Add(day.Add(8*time.Hour), &report.State{GPUs: gpus, Holders: hold("serving/llama")})
	r.Add(day.Add(18*time.Hour), &report.State{GPUs: gpus, Holders: hold("serving/qwen")})
	end := day.Add(24 * time.Hour)
	return Page{
		Title: "swap", Start: day, End: end, Rows: r.Rows(end),
		Windows:     []Band{{Label: "business-hours", From: day.Add(8 * time.Hour), To: day.Add(18 * time.Hour)}},
		Transitions: []report.Transition{{Schedule: "serving/s", At: day.Add(8 * time.Hour)}, {Schedule: "serving/s", At: day.Add(18 * time.Hour)}},
		Waiting:     []report.Pod{{Name: "ml/<b>", Waiting: &report.Waiting{Reason: "Unschedulable", Message: "no free device"}}},
	}
}

func TestRowsFollowTheHolders(t *testing.T) {
	p := swapPage()
	if len(p.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(p.Rows))
	}
	var got []string
	for _, s := range p.Rows[0].Segments {
		got = append(got, s.Workload+"@"+s.From.Format("15:04")+"-"+s.To.Format("15:04"))
	}
	if want := "serving/qwen@00:00-08:00 serving/llama@08:00-18:00 serving/qwen@18:00-00:00"; strings.Join(got, " ") != want {
		t.Errorf("segments %v, want %s", got, want)
	}
}

func TestRenderIsSelfContainedAndEscaped(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, swapPage()); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{`class="hold" data-workload="serving/llama"`, `class="transition"`, "business-hours", "ml/&lt;b&gt;", "UTC+07:00"} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, external := range []string{"<script src", "<link", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, ""), external) {
			t.Errorf("page refers to something outside itself: %q", external)
		}
	}
}

// TestRenderScreenshot has headless Chromium draw the page and checks that
// the llama workload's colour shows between the 08:00 and 18:00 marks of
// the GPU rows. Skipped where Chromium is not installed.
func TestRenderScreenshot(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no chromium on PATH")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "timeline.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := Render(f, swapPage()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	cmd := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--window-size=1400,400", "--screenshot="+shot, "file://"+page)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// Find the rows by colour: count pixels of llama's and qwen's colours.
	count := func(hex string) int {
		var r, g, b uint32
		if _, err := fmt.Sscanf(hex, "#%02x%02x%02x", &r, &g, &b); err != nil {
			t.Fatal(err)
		}
		n := 0
		bounds := img.Bounds()
		for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
			for x := bounds.Min.X; x < bounds.Max.X; x++ {
				pr, pg, pb, _ := img.At(x, y).RGBA()
				if pr>>8 == r && pg>>8 == g && pb>>8 == b {
					n++
				}
			}
		}
		return n
	}
	llama, qwen := count(colour("serving/llama")), count(colour("serving/qwen"))
	// llama holds both GPUs for 10 of 24 hours, qwen for 14.
	if llama < 5000 || qwen < 5000 {
		t.Fatalf("the GPU rows are not drawn: %d llama pixels, %d qwen pixels", llama, qwen)
	}
	if ratio := float64(llama) / float64(qwen); ratio < 0.55 || ratio > 0.9 {
		t.Errorf("llama/qwen pixel ratio %.2f, want about 10/14", ratio)
	}
}
