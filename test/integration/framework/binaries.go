package framework

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// builds are the commands this test binary built itself, when ROTA_BIN_DIR
// is unset: each once, into one directory that RunTests removes at the end.
var builds = struct {
	mu     sync.Mutex
	dir    string
	byName map[string]*build
}{byName: map[string]*build{}}

type build struct {
	once sync.Once
	err  error
	out  []byte
}

// BinDir returns a directory holding Rota's commands cmd/<name> for every
// name: ROTA_BIN_DIR, where `make build` left them (the test fails if one is
// missing), or, when the variable is unset, a directory this test binary
// builds them into the way `make build` does (-trimpath), each command once
// however many tests ask. A package that calls it without ROTA_BIN_DIR
// removes the builds with RunTests in its TestMain.
func BinDir(t testing.TB, names ...string) string {
	t.Helper()
	if dir := os.Getenv("ROTA_BIN_DIR"); dir != "" {
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Fatalf("ROTA_BIN_DIR=%s has no %s binary (run 'make build'): %v", dir, name, err)
			}
		}
		return dir
	}
	dir, err := buildDir()
	if err != nil {
		t.Fatalf("directory for test builds: %v", err)
	}
	for _, name := range names {
		b := buildOf(name)
		b.once.Do(func() {
			// -trimpath as `make build`: kube-apiserver's test server, which
			// the sandbox embeds, finds its fixtures by source path, and
			// pkg/sandbox/controlplane expects the module-relative one.
			cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, name), "./cmd/"+name)
			cmd.Dir = RepoRoot(t)
			b.out, b.err = cmd.CombinedOutput()
		})
		if b.err != nil {
			t.Fatalf("go build -trimpath ./cmd/%s: %v\n%s", name, b.err, b.out)
		}
	}
	return dir
}

// Binary returns the path of Rota's command cmd/<name>, as BinDir finds or
// builds it.
func Binary(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(BinDir(t, name), name)
}

// RunTests runs the package's tests and removes what BinDir built for them;
// call it from TestMain: os.Exit(framework.RunTests(m)).
func RunTests(m *testing.M) int {
	code := m.Run()
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
	return code
}

func buildDir() (string, error) {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "rota-test-bin-")
		if err != nil {
			return "", err
		}
		builds.dir = dir
	}
	return builds.dir, nil
}

func buildOf(name string) *build {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	b, ok := builds.byName[name]
	if !ok {
		b = &build{}
		builds.byName[name] = b
	}
	return b
}
