package preflight

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/version"
)

// builtOn is the Kubernetes minor release Rota is built on and tested
// against (1.37).
const builtOn = 37

// serverVersion reads the API server's version. ok is false when the API
// server cannot be reached, and the other checks would only repeat that.
func (c checker) serverVersion() (r Result, ok bool) {
	const name = "Kubernetes version"
	info, err := c.client.Discovery().ServerVersion()
	if err != nil {
		return Result{Name: name, Status: Fail, Detail: fmt.Sprintf("the API server cannot be reached: %v", err),
			Fix: "check the kubeconfig context (kubectl config current-context) and that the API server answers (kubectl get --raw /version)"}, false
	}
	return versionResult(name, info), true
}

// versionResult judges the version the API server behaves as: its
// emulation version when it reports one, else its own.
func versionResult(name string, info *version.Info) Result {
	major, minor := info.Major, info.Minor
	if info.EmulationMajor != "" {
		major, minor = info.EmulationMajor, info.EmulationMinor
	}
	m, err := strconv.Atoi(strings.TrimRight(minor, "+"))
	if major != "1" || err != nil {
		return Result{Name: name, Status: Unknown, Detail: fmt.Sprintf("the API server reports %q (major %q, minor %q)", info.GitVersion, major, minor),
			Fix: "Rota needs Kubernetes 1.37: check the control plane's version by hand"}
	}
	detail := fmt.Sprintf("%s (behaves as 1.%d)", info.GitVersion, m)
	switch {
	case m < builtOn:
		return Result{Name: name, Status: Fail, Detail: detail, Fix: "Rota needs Kubernetes 1.37: upgrade the control plane"}
	case m > builtOn+1:
		return Result{Name: name, Status: Fail, Detail: detail,
			Fix: "rota-scheduler is kube-scheduler 1.37, and kube-scheduler may be at most one minor release older than kube-apiserver: use a Rota built on a newer Kubernetes"}
	case m == builtOn+1:
		return Result{Name: name, Status: Unknown, Detail: detail,
			Fix: "within kube-scheduler's version skew (one minor release older than kube-apiserver) but untested: Rota is built on and tested against 1.37 (docs/install.md, Version skew)"}
	}
	return Result{Name: name, Status: OK, Detail: detail}
}
