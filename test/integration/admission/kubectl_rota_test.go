package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/whyreport"
	"github.com/rota-dev/rota/test/integration/framework"
)

// runKubectlRota runs `kubectl rota args...` against the control plane.
func runKubectlRota(t *testing.T, cp *framework.ControlPlane, args ...string) string {
	t.Helper()
	cmd := exec.Command(framework.Binary(t, "kubectl-rota"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl rota %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkKubectlRota shows, in the fragmentation scenario at t=10, what an operator
// sees: why B waits, and the pool with its holders.
func checkKubectlRota(t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	why := runKubectlRota(t, cp, "why", "b-rank-0", "-n", "team-b")
	t.Logf("kubectl rota why b-rank-0 -n team-b:\n%s", why)
	for _, want := range []string{"Waiting: needs 2 GPUs on one node — H100 2/4 free", "Pod team-b/b-rank-0: TopologyFragmentation since",
		"H100: 2/4 free (at most 1 on one node, n1)", "preemption would not help"} {
		if !strings.Contains(why, want) {
			t.Errorf("kubectl rota why: missing %q", want)
		}
	}
	if dup := whyreport.Repeated(why); dup != "" {
		t.Errorf("kubectl rota why says %q twice", dup)
	}
	for _, line := range strings.Split(why, "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("kubectl rota why: line wider than 100 columns: %q", line)
		}
	}
	var report struct {
		Reason  string `json:"reason"`
		Waiting bool   `json:"waiting"`
	}
	if err := json.Unmarshal([]byte(runKubectlRota(t, cp, "why", "b-rank-0", "-n", "team-b", "-o", "json")), &report); err != nil {
		t.Fatalf("kubectl rota why -o json: %v", err)
	}
	if report.Reason != "TopologyFragmentation" || !report.Waiting {
		t.Errorf("kubectl rota why -o json: %+v, want waiting with TopologyFragmentation", report)
	}
	pool := runKubectlRota(t, cp, "pool")
	t.Logf("kubectl rota pool:\n%s", pool)
	for _, want := range []string{"n1    gpu-0", "team-a/a-", "GPU-n2-1", "Healthy"} {
		if !strings.Contains(pool, want) {
			t.Errorf("kubectl rota pool: missing %q", want)
		}
	}
	// The tenant summary below the GPUs: team-a's two pods hold two H100s,
	// no reservation.
	if !regexp.MustCompile(`(?m)^TENANT\s+MODEL\s+RESERVED\s+CHARGED$`).MatchString(pool) ||
		!regexp.MustCompile(`(?m)^team-a\s+H100\s+0\s+2$`).MatchString(pool) {
		t.Errorf("kubectl rota pool: no tenant summary charging team-a 2 H100s")
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(runKubectlRota(t, cp, "pool", "-o", "json")), &rows); err != nil || len(rows) != 4 {
		t.Errorf("kubectl rota pool -o json: %d rows, err %v; want 4", len(rows), err)
	}
}

// TestWhyFivePods is issue #23's example: one node with 8 H100, one with 8
// A100, five pods asking "4 × H100, else 4 × A100, same model". Four land,
// the fifth waits, and `kubectl rota why` answers in one line with both
// tiers' numbers, each said once.
func TestWhyFivePods(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.StartClaimController(t)
	cp.Create(t, framework.Namespace("ml"), framework.DeviceClass(),
		framework.Node("dgx-h100-0"), framework.GPUSlice("dgx-h100-0", framework.GPUs(framework.H100, 8)...),
		framework.Node("dgx-a100-0"), framework.GPUSlice("dgx-a100-0", framework.GPUs(framework.A100, 8)...))
	cp.StartScheduler(t)
	tmpl := framework.TieredClaimTemplate("ml", "h100-else-a100", framework.ModelTier("H100"), framework.ModelTier("A100"))
	for i := range tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable {
		tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable[i].Count = 4
	}
	sameModel := resourceapi.FullyQualifiedName(gpuv1.DriverName + "/" + string(gpuv1.AttributeModel))
	tmpl.Spec.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: &sameModel}}
	cp.Create(t, tmpl)
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("train-%d", i)
		cp.Create(t, framework.GPUPod("ml", name, sched, "h100-else-a100"))
		cp.WaitForPodBound(t, "ml", name)
	}
	cp.Create(t, framework.GPUPod("ml", "train-5", sched, "h100-else-a100"))
	cp.WaitForWaiting(t, "ml", "train-5", "InsufficientCapacity")
	cp.WaitForPodAnnotation(t, "ml", "train-5", gpuv1.WaitDetailAnnotation)

	why := runKubectlRota(t, cp, "why", "train-5", "-n", "ml")
	t.Logf("kubectl rota why -n ml train-5:\n%s", why)
	lines := strings.Split(strings.TrimRight(why, "\n"), "\n")
	wantFirst := "Waiting: no tier has 4 free GPUs on one node — H100 0/8 free, A100 0/8 free"
	if lines[0] != wantFirst {
		t.Errorf("first line %q, want %q", lines[0], wantFirst)
	}
	for _, want := range []string{
		"1/2 H100: 0/8 free, 8 allocated, 0 reserved, 0 tainted, 8 other model",
		"2/2 A100: 0/8 free, 8 allocated, 0 reserved, 0 tainted, 8 other model",
	} {
		if !strings.Contains(why, want) {
			t.Errorf("kubectl rota why: missing %q", want)
		}
	}
	if len(lines) > 12 {
		t.Errorf("kubectl rota why: %d lines, want at most 12", len(lines))
	}
	if strings.Contains(why, "constraint not met") || strings.Contains(why, "\x1b[") {
		t.Errorf("kubectl rota why: a missing model shown as an unmet constraint, or colour off a terminal")
	}
	if dup := whyreport.Repeated(why); dup != "" {
		t.Errorf("kubectl rota why says %q twice", dup)
	}

	// The fallback placement: one event line, UUIDs in the annotation.
	fourth, err := cp.Client.CoreV1().Pods("ml").Get(context.Background(), "train-4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	framework.WaitFor(t, "TieredPlacement event on train-4", func(context.Context) (bool, string, error) {
		notes = cp.PodEventNotes(t, fourth, "TieredPlacement")
		return len(notes) == 1, strings.Join(notes, " | "), nil
	})
	wantNote := "4 × A100 on dgx-a100-0 (gpu-4..7), tier 2/2; H100 tier: 0 of 8 free — 8 allocated; policy "
	if !strings.HasPrefix(notes[0], wantNote) {
		t.Errorf("TieredPlacement of train-4: %q, want it to start with %q", notes[0], wantNote)
	}
	if got := fourth.Annotations[gpuv1.DevicesAnnotation]; !strings.Contains(got, "dgx-a100-0/gpu-4=GPU-dgx-a100-0-4") {
		t.Errorf("train-4 %s=%q, want its devices with their UUIDs", gpuv1.DevicesAnnotation, got)
	}
	placed := runKubectlRota(t, cp, "why", "train-4", "-n", "ml")
	t.Logf("kubectl rota why -n ml train-4:\n%s", placed)
	var yamlReport struct {
		Verdict string `json:"verdict"`
	}
	if err := yaml.Unmarshal([]byte(runKubectlRota(t, cp, "why", "train-5", "-n", "ml", "-o", "yaml")), &yamlReport); err != nil || yamlReport.Verdict != wantFirst {
		t.Errorf("kubectl rota why -o yaml: verdict %q (err %v), want %q", yamlReport.Verdict, err, wantFirst)
	}
}
