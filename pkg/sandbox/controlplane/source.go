package controlplane

import (
	"reflect"
	"runtime"

	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// testServerSource is the path kube-apiserver's test server package reports
// for its own source file: absolute normally, module-relative
// ("k8s.io/kubernetes@v1.37.2/cmd/kube-apiserver/app/testing/testserver.go")
// with -trimpath. It is read from the compiled function itself, so it holds
// in a test binary as in a built one (a test binary's build info need not
// list k8s.io/kubernetes among its dependencies).
func testServerSource() (string, bool) {
	fn := runtime.FuncForPC(reflect.ValueOf(apiservertesting.StartTestServer).Pointer())
	if fn == nil {
		return "", false
	}
	file, _ := fn.FileLine(fn.Entry())
	return file, file != ""
}
