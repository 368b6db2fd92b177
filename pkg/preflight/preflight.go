// Package preflight checks that a cluster can run Rota, and after an install
// that Rota runs: `kubectl rota preflight`. Each check reads the API server
// only and says what to do when it fails.
package preflight

import (
	"context"
	"fmt"
	"io"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// Status is a check's outcome.
type Status string

const (
	// OK: the check passed.
	OK Status = "OK"
	// Fail: Rota cannot work, or is not installed, until this is fixed.
	Fail Status = "FAIL"
	// Unknown: the API server does not show it; Fix says how to check by
	// hand.
	Unknown Status = "UNKNOWN"
)

// Result is one check.
type Result struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Detail is what was found.
	Detail string `json:"detail"`
	// Fix is what to do; empty when Status is OK.
	Fix string `json:"fix,omitempty"`
}

// Options say where Rota is installed.
type Options struct {
	// Namespace holds Rota's Deployments and the driver's DaemonSet.
	Namespace string
	// GPUNodeSelector is the label selector of the nodes the driver runs
	// on (the DaemonSet's nodeSelector).
	GPUNodeSelector string
}

// DefaultOptions are those of the shipped manifests.
func DefaultOptions() Options {
	return Options{Namespace: "rota-system", GPUNodeSelector: "nvidia.com/gpu.present=true"}
}

// Run runs every check in order. When the API server cannot be reached it
// returns that one failure; otherwise a check that cannot read what it needs
// fails with the error and the others still run.
func Run(ctx context.Context, client kubernetes.Interface, o Options) []Result {
	c := checker{client: client, o: o}
	v, ok := c.serverVersion()
	if !ok {
		return []Result{v}
	}
	return []Result{
		v,
		c.resourceAPI(),
		c.admissionAPI(),
		c.draUsable(ctx),
		c.rotaCRDs(),
		c.deviceClasses(ctx),
		c.components(ctx),
		c.driverDaemonSet(ctx),
		c.driverSlices(ctx),
		c.cdi(ctx),
	}
}

// Failed reports whether any check failed.
func Failed(rs []Result) bool {
	for _, r := range rs {
		if r.Status == Fail {
			return true
		}
	}
	return false
}

// Print writes one line per check, "STATUS  name: detail", and the fix
// indented under a check that did not pass.
func Print(w io.Writer, rs []Result) error {
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "%-7s %s: %s\n", r.Status, r.Name, r.Detail); err != nil {
			return err
		}
		if r.Fix != "" {
			if _, err := fmt.Fprintf(w, "        -> %s\n", r.Fix); err != nil {
				return err
			}
		}
	}
	n := map[Status]int{}
	for _, r := range rs {
		n[r.Status]++
	}
	_, err := fmt.Fprintf(w, "%d ok, %d failed, %d unknown\n", n[OK], n[Fail], n[Unknown])
	return err
}

type checker struct {
	client kubernetes.Interface
	o      Options
}

// served checks that groupVersion serves every resource in want.
func (c checker) served(name, groupVersion string, want []string, fix string) Result {
	list, err := c.client.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		return Result{Name: name, Status: Fail, Detail: fmt.Sprintf("%s is not served: %v", groupVersion, err), Fix: fix}
	}
	have := map[string]bool{}
	for _, r := range list.APIResources {
		have[r.Name] = true
	}
	var missing []string
	for _, w := range want {
		if !have[w] {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return Result{Name: name, Status: Fail, Detail: fmt.Sprintf("%s serves no %s", groupVersion, strings.Join(missing, ", ")), Fix: fix}
	}
	return Result{Name: name, Status: OK, Detail: fmt.Sprintf("%s serves %s", groupVersion, strings.Join(want, ", "))}
}
