package forecast

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestHTMLIsSelfContained(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, overWeek(t), hcm, "week <forecast>"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`class="overcommit"`, `class="transition"`, `class="capacity"`, "business-hours", "maint-wed", "week &lt;forecast&gt;", "14 / 10"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, external := range []string{"<script src", "<link", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), external) {
			t.Errorf("page refers to something outside itself: %q", external)
		}
	}
}

// TestHTMLScreenshot has headless Chromium draw the over-committed week and
// the week that fits, and counts the pixels of the demand and over-commit
// colours: red shows only where demand exceeds capacity, in proportion to
// the GPUs over. Skipped where Chromium is not installed.
func TestHTMLScreenshot(t *testing.T) {
	over := screenshot(t, overWeek(t))
	fits := screenshot(t, runForecast(t, weekInput(t, nil, nil)))
	red, blue := count(t, over, colourOver), count(t, over, colourDemand)
	if blue < 20000 {
		t.Fatalf("the demand is not drawn: %d pixels of %s", blue, colourDemand)
	}
	if n := count(t, fits, colourOver); n != 0 {
		t.Errorf("the week that fits shows %d red pixels", n)
	}
	// Over capacity: 4 GPUs for 48 h and 2 GPUs for 2 h, against a blue
	// area of 8 GPUs for 118 h and 10 for 50 h (y scale to 15). Red pixels
	// also draw the table rows' text, so allow a margin above.
	wantRatio := (4.0*48 + 2*2) / (8.0*118 + 10*50)
	if ratio := float64(red) / float64(blue); ratio < wantRatio*0.8 || ratio > wantRatio*1.6 {
		t.Errorf("red/blue pixel ratio %.3f, want about %.3f (%d red, %d blue)", ratio, wantRatio, red, blue)
	}
}

func screenshot(t *testing.T, f *Forecast) image.Image {
	t.Helper()
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
	page := filepath.Join(dir, "forecast.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, f, hcm, "forecast"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	cmd := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--window-size=1400,500", "--screenshot="+shot, "file://"+page)
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
	return img
}

func count(t *testing.T, img image.Image, hex string) int {
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
