package preflight

import (
	"context"
	"net"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestVersionResult(t *testing.T) {
	for _, c := range []struct {
		info version.Info
		want Status
	}{
		{version.Info{GitVersion: "v1.37.2", Major: "1", Minor: "37"}, OK},
		{version.Info{GitVersion: "v1.37.2-gke.100", Major: "1", Minor: "37+"}, OK},
		{version.Info{GitVersion: "v1.36.4", Major: "1", Minor: "36"}, Fail},
		{version.Info{GitVersion: "v1.38.0", Major: "1", Minor: "38"}, Unknown},
		{version.Info{GitVersion: "v1.39.0", Major: "1", Minor: "39"}, Fail},
		// A 1.38 API server emulating 1.37 behaves as 1.37.
		{version.Info{GitVersion: "v1.38.0", Major: "1", Minor: "38", EmulationMajor: "1", EmulationMinor: "37"}, OK},
		// A test build without version stamps.
		{version.Info{GitVersion: "v0.0.0-master+$Format:%H$"}, Unknown},
	} {
		if got := versionResult("v", &c.info); got.Status != c.want || (got.Status != OK && got.Fix == "") {
			t.Errorf("%+v: %s (%s, fix %q), want %s", c.info, got.Status, got.Detail, got.Fix, c.want)
		}
	}
}

func TestRunStopsWhenTheAPIServerCannotBeReached(t *testing.T) {
	// A listener that is closed at once: nothing answers on its port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	rs := Run(context.Background(), client, DefaultOptions())
	if len(rs) != 1 || rs[0].Status != Fail || !strings.Contains(rs[0].Detail, "cannot be reached") || rs[0].Fix == "" {
		t.Errorf("Run = %+v, want one failure saying the API server cannot be reached", rs)
	}
	if !Failed(rs) {
		t.Error("Failed = false")
	}
}
