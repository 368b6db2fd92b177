package oci

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

const (
	sumA = "ba4f88f73dbc3ae9055f3c20f4523bfdbaf1ad13ff95e258924f77d20b4fbedf"
	sumB = "0d5f444f594e48c1e16a41d8fc628a09b24c658916a1274025c2330f2a802bed"
)

func TestLockRoundTrip(t *testing.T) {
	pins := []Pin{
		{Name: "libc6", Version: "2.36-9+deb12u14", Arch: "amd64", SHA256: sumA, Distro: "debian-12"},
		{Name: "ca-certificates", Version: "20230311+deb12u1", Arch: "all", SHA256: sumB, Distro: "debian-12"},
	}
	b, err := FormatLock(pins)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseLock(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(got, pins) {
		t.Errorf("ParseLock(FormatLock(pins)) = %+v, want %+v", got, pins)
	}
	if purl := got[0].PURL(); purl != "pkg:deb/debian/libc6@2.36-9+deb12u14?arch=amd64&distro=debian-12" {
		t.Errorf("PURL = %s", purl)
	}
}

func TestParseLockRefuses(t *testing.T) {
	line := func(name, version, arch, sum string) string {
		return strings.Join([]string{name, version, arch, sum}, " ") + "\n"
	}
	for why, lock := range map[string]string{
		"no distro":         line("libc6", "2.36-9", "amd64", sumA),
		"a short hash":      "distro debian-12\n" + line("libc6", "2.36-9", "amd64", sumA[:40]),
		"an upper-case sum": "distro debian-12\n" + line("libc6", "2.36-9", "amd64", strings.ToUpper(sumA)),
		"an option as name": "distro debian-12\n" + line("-oDir=/tmp", "2.36-9", "amd64", sumA),
		"a version with =":  "distro debian-12\n" + line("libc6", "2.36=9", "amd64", sumA),
		"a package twice":   "distro debian-12\n" + line("libc6", "2.36-9", "amd64", sumA) + line("libc6", "2.36-10", "amd64", sumB),
		"a missing word":    "distro debian-12\nlibc6 2.36-9 amd64\n",
		"two distros":       "distro debian-12\ndistro debian-13\n",
	} {
		if _, err := ParseLock(strings.NewReader(lock)); err == nil {
			t.Errorf("a lock with %s was accepted:\n%s", why, lock)
		}
	}
	// The same package for two architectures is two pins.
	lock := "# comment\n\ndistro debian-12\n" + line("libc6", "2.36-9", "amd64", sumA) + line("libc6", "2.36-9", "arm64", sumB)
	if pins, err := ParseLock(strings.NewReader(lock)); err != nil || len(pins) != 2 {
		t.Errorf("libc6 for amd64 and arm64: %v, %v", pins, err)
	}
}

func TestPinUpstream(t *testing.T) {
	for version, want := range map[string]string{
		"2.36-9+deb12u14":  "2.36",
		"1:2.39-0ubuntu8":  "2.39",
		"20230311+deb12u1": "20230311+deb12u1",
	} {
		if got := (Pin{Version: version}).Upstream(); got != want {
			t.Errorf("Upstream of %s = %s, want %s", version, got, want)
		}
	}
	if got := (Pin{Name: "x", Version: "1:2.0-1", Arch: "all"}).fileName(); got != "x_1%3a2.0-1_all.deb" {
		t.Errorf("fileName = %s, want apt's x_1%%3a2.0-1_all.deb", got)
	}
}
