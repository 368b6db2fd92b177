package manifests

import (
	"strings"
	"testing"
)

// TestReleaseManifestsRefuseBadInput: no release for "latest", a version
// that is no tag, or a registry that is no repository path.
func TestReleaseManifestsRefuseBadInput(t *testing.T) {
	dir := "../../../manifests"
	for _, c := range []struct{ version, registry, want string }{
		{"latest", DefaultRegistry, "names no release"},
		{"v1.0.0+build", DefaultRegistry, "not an image tag"},
		{"", DefaultRegistry, "not an image tag"},
		{"v1.0.0", "Registry With Spaces", "not a registry"},
		{"v1.0.0", "", "not a registry"},
	} {
		_, err := Render(dir, c.version, c.registry, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Render(%q, %q) = %v, want an error saying %q", c.version, c.registry, err, c.want)
		}
	}
}
