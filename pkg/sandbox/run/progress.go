package run

import (
	"fmt"
	"io"
	"time"
)

// progressTime is how progress lines print virtual times.
const progressTime = "Mon 2006-01-02 15:04"

// progress writes one line per milestone of a run, prefixed with the real
// time since the run began; the zero value writes nothing.
type progress struct {
	w     io.Writer
	start time.Time
}

func (p progress) printf(format string, args ...any) {
	if p.w == nil {
		return
	}
	elapsed := time.Since(p.start).Round(100 * time.Millisecond)
	// A lost progress line is no reason to fail the run.
	_, _ = fmt.Fprintf(p.w, "[%6s] "+format+"\n", append([]any{elapsed}, args...)...)
}
