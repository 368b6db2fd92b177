package oci

import (
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// needApt skips a test that downloads the pinned packages where the
// machine has no apt-get or dpkg-deb (not Debian or Ubuntu); CI has both.
func needApt(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the pinned base packages are downloaded with apt-get and read with dpkg-deb: %v", err)
		}
	}
}

// lockFile is the repository's lock, from this package's directory.
var lockFile = filepath.Join("..", "..", "..", LockFile)

func TestPinnedPackages(t *testing.T) {
	needApt(t)
	cache := t.TempDir()
	base, err := LoadBase(lockFile, cache, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	if base.Libc == nil {
		t.Fatalf("%s pins no libc6 for %s", lockFile, runtime.GOARCH)
	}
	for _, lib := range []string{"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1"} {
		if _, err := base.Libc.Library(lib); err != nil {
			t.Error(err)
		}
	}
	bundle, err := CABundle(base.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) || len(strings.Split(string(bundle), "-----BEGIN CERTIFICATE-----")) < 100 {
		t.Errorf("the CA bundle of %s holds no or few certificates (%d bytes)", base.CA.Pin, len(bundle))
	}

	pin := base.Libc.Pin
	cached := filepath.Join(cache, pin.fileName())
	t.Run("a cached .deb with the lock's hash is reused", func(t *testing.T) {
		old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		if err := os.Chtimes(cached, old, old); err != nil {
			t.Fatal(err)
		}
		if _, err := Fetch(pin, cache); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(cached); err != nil || !fi.ModTime().Equal(old) {
			t.Errorf("the cached %s was downloaded again (%v)", cached, err)
		}
	})
	t.Run("a damaged cached .deb is downloaded again", func(t *testing.T) {
		if err := os.WriteFile(cached, []byte("not a deb"), 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := Fetch(pin, cache)
		if err != nil {
			t.Fatal(err)
		}
		if sum, err := fileSHA256(file); err != nil || sum != pin.SHA256 {
			t.Errorf("after a fresh download: sha256 %s, %v, want %s", sum, err, pin.SHA256)
		}
	})
	t.Run("a .deb that differs from the lock is refused", func(t *testing.T) {
		wrong := pin
		wrong.SHA256 = strings.Repeat("0", 64)
		_, err := Fetch(wrong, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "refusing") || !strings.Contains(err.Error(), pin.SHA256) {
			t.Errorf("Fetch with another hash: %v, want a refusal naming both hashes", err)
		}
	})
	t.Run("a version apt does not know says how to refresh", func(t *testing.T) {
		gone := pin
		gone.Version = "2.36-0+rota.gone"
		_, err := Fetch(gone, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "apt-get update") || !strings.Contains(err.Error(), "make base-lock") {
			t.Errorf("Fetch of an unknown version: %v, want apt-get update and make base-lock named", err)
		}
	})
}
