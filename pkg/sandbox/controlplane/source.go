package controlplane

import (
	"path"
	"runtime/debug"
)

// testServerSource is the path kube-apiserver's test server package reports
// for its own source file: absolute normally, module-relative with -trimpath.
func testServerSource() (string, bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	trimmed := false
	for _, s := range info.Settings {
		if s.Key == "-trimpath" && s.Value == "true" {
			trimmed = true
		}
	}
	if !trimmed {
		return "/", true
	}
	for _, dep := range info.Deps {
		if dep.Path == "k8s.io/kubernetes" {
			return path.Join(dep.Path+"@"+dep.Version, "cmd/kube-apiserver/app/testing/testserver.go"), true
		}
	}
	return "", false
}
