package main

import (
	"fmt"
	"sort"
	"strings"
)

// rule says which of Rota's packages the packages under From may import.
// Paths are relative to the module and match a package and everything
// below it. A package is checked against every rule whose From covers it.
type rule struct {
	// From is the importing package (and its subpackages).
	From string
	// Only, when set, lists the only Rota packages From may import (besides
	// itself and its subpackages).
	Only []string
	// Never lists Rota packages From must not import, unless the importer is
	// itself inside the listed package.
	Never []string
	// Why is shown with a violation.
	Why string
}

// rules are the arrows of docs/architecture.md ("Package map"). Keep the
// two in step.
var rules = []rule{
	{From: "pkg/apis", Only: []string{"pkg/apis"},
		Why: "the API types and the wire contract are the bottom layer: every binary imports them, they import nothing of Rota's"},
	{From: "pkg/driver", Only: []string{"pkg/apis/gpu", "pkg/secureserving"},
		Why: "the DRA driver shares only the wire contract (and the authenticated /metrics listener) with the rest of Rota"},
	{From: "pkg/secureserving", Only: []string{"pkg/secureserving"},
		Why: "the authenticated /metrics listener of the driver and the schedule controller knows nothing of Rota"},
	{From: "pkg/plugins", Never: []string{"pkg/reservation/controller", "pkg/quotastatus", "pkg/schedule/controller", "pkg/driver", "pkg/sandbox", "pkg/sim", "pkg/scheduler"},
		Why: "scheduler plugins apply rules; they never reach into a controller, the driver or the sandbox"},
	{From: "pkg/gpupool", Only: []string{"pkg/apis"},
		Why: "the GPU pool model sits below every plugin and tool that reads the pool (plugins, waits, poolreport, the sandbox, the reservation controller, the schedule preview): it knows only the API types and the wire contract"},
	{From: "pkg/gpuquota", Only: []string{"pkg/apis"},
		Why: "the GPUQuota rules (guarantees, borrowing, reclaim amounts, the accounting) are pure: the Quota and Reclaim plugins, the quota controller and kubectl-rota read them, they know none of those"},
	{From: "pkg/quotastatus", Only: []string{"pkg/gpuquota", "pkg/gpupool", "pkg/usage", "pkg/reservation", "pkg/apis"}, Never: []string{"pkg/reservation/controller"},
		Why: "the GPUQuota status controller applies the GPUQuota accounting to the pool model and the usage charge rule; it knows no plugin, other controller, driver or sandbox"},
	{From: "pkg/waits", Never: []string{"pkg/plugins", "pkg/reservation/controller", "pkg/schedule/controller", "pkg/driver", "pkg/sandbox", "pkg/sim"},
		Why: "the wait reasons sit below the plugins and controllers that use them"},
	{From: "pkg/reservation", Never: []string{"pkg/reservation/controller", "pkg/quotastatus", "pkg/plugins", "pkg/schedule", "pkg/driver", "pkg/sandbox", "pkg/sim", "pkg/scheduler"},
		Why: "the GPUReservation rules (imported by the Reservation plugin) know no controller; the controller does not depend on the scheduler, the driver or the schedule controller"},
	{From: "pkg/schedule", Never: []string{"pkg/schedule/controller", "pkg/quotastatus", "pkg/plugins", "pkg/reservation/controller", "pkg/driver", "pkg/sandbox", "pkg/sim", "pkg/scheduler"},
		Why: "the DeploySchedule evaluator, validation and preview know no controller; the controller does not depend on the scheduler, the driver or the reservation controller"},
	{From: "pkg/schedule/targetguard", Only: []string{"pkg/apis"},
		Why: "the target webhook decides from DeploySchedules alone and issues its own certificate; the controller binary serves it, it knows no controller"},
	{From: "pkg/poolreport", Never: []string{"pkg/plugins", "pkg/reservation/controller", "pkg/quotastatus", "pkg/schedule/controller", "pkg/driver", "pkg/sandbox", "pkg/sim"},
		Why: "the pool report reads objects; it shares no code with the components that write them"},
	{From: "pkg/whyreport", Never: []string{"pkg/plugins", "pkg/reservation/controller", "pkg/schedule/controller", "pkg/driver", "pkg/sandbox", "pkg/sim"},
		Why: "`kubectl rota why` reads what the scheduler wrote; it shares no code with the components that write it"},
	{From: "pkg/usage", Only: []string{"pkg/gpupool", "pkg/apis"},
		Why: "usage accounting applies one charge rule to the pool model; the pool report and the controller binary use it, it uses none of them"},
	{From: "pkg/statemetrics", Only: []string{"pkg/poolreport", "pkg/gpupool", "pkg/waits", "pkg/apis"},
		Why: "the state gauges read objects from informers through the pool report and the wait reasons; they share no code with the components that write the objects"},
	{From: "pkg/advisor", Only: []string{"pkg/gpupool", "pkg/schedule", "pkg/apis"},
		Why: "the unblock advisor is a pure engine over the pool model (and the DeploySchedule evaluator's transitions); the WaitReason plugin, kubectl-rota and the sandbox use it, it uses none of them"},
	{From: "pkg/defrag", Only: []string{"pkg/advisor", "pkg/gpupool", "pkg/apis"},
		Why: "kubectl rota defrag plans with the unblock advisor over listed objects and evicts through the Eviction API; it knows no plugin, controller, driver or sandbox"},
	{From: "pkg/preflight", Only: []string{"pkg/apis"},
		Why: "`kubectl rota preflight` reads the cluster through the API server and knows only the API types and the wire contract"},
	{From: "pkg/evictor", Only: []string{"pkg/apis", "pkg/events"},
		Why: "the reclaim evictor (checkpoint, then the Eviction API) is a library for the Reclaim plugin: it knows only the wire contract and client-go, no plugin, controller or rule package"},
	{From: "pkg/events", Only: []string{"pkg/apis"},
		Why: "the event broadcaster of the controller binaries knows only the API types"},
	{From: "pkg/scheduler", Only: []string{"pkg/plugins", "pkg/gpupool", "pkg/gpuquota", "pkg/waits"},
		Why: "the plugin registry wires plugins and the pool caches, guarantee terms and wait causes they share, nothing else"},
	{From: "pkg/sim", Never: []string{"pkg/sandbox", "pkg/plugins", "pkg/reservation/controller", "pkg/schedule/controller", "pkg/driver"},
		Why: "the simulated kubelet and virtual clock stand in for outside parts; they know nothing of Rota's components"},
	{From: "hack/release", Never: []string{"pkg", "cmd", "test"},
		Why: "the release tooling builds images from binaries and renders manifests; it links none of Rota's code"},
	{From: "pkg", Never: []string{"cmd", "test", "hack"},
		Why: "libraries never import binaries, tests or tools"},
}

// pkg is what the checker needs of `go list -json`.
type pkg struct {
	ImportPath string
	Imports    []string
}

// violation is one import that breaks a rule.
type violation struct {
	From, Import string
	Rule         rule
}

func (v violation) String() string {
	return fmt.Sprintf("%s imports %s: %s", v.From, v.Import, v.Rule.Why)
}

// under reports whether p is dir or a package below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if under(p, d) {
			return true
		}
	}
	return false
}

// check returns every import of pkgs (paths relative to module) that
// breaks a rule, sorted.
func check(module string, pkgs []pkg) []violation {
	var out []violation
	for _, p := range pkgs {
		from, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			to, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			for _, r := range rules {
				if !under(from, r.From) {
					continue
				}
				outside := r.Only != nil && !under(to, r.From) && !underAny(to, r.Only)
				denied := underAny(to, r.Never) && !underAny(from, r.Never)
				if outside || denied {
					out = append(out, violation{From: from, Import: to, Rule: r})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].Import < out[j].Import
	})
	return out
}
