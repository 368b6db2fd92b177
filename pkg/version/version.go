// Package version reports the build of a Rota binary, set at link time by the
// Makefile's -ldflags.
package version

import "fmt"

// Set by -ldflags -X; "unknown" in a plain `go build`.
var (
	version   = "unknown"
	gitCommit = "unknown"
	buildDate = "unknown"
)

// Info describes one build.
type Info struct {
	Version   string `json:"version"`
	GitCommit string `json:"gitCommit"`
	BuildDate string `json:"buildDate"`
}

// Get returns the build information of this binary.
func Get() Info {
	return Info{Version: version, GitCommit: gitCommit, BuildDate: buildDate}
}

// String is a one-line description, e.g. for --version.
func (i Info) String() string {
	return fmt.Sprintf("Rota %s (commit %s, built %s)", i.Version, i.GitCommit, i.BuildDate)
}
