package state

import (
	"slices"
	"testing"

	"k8s.io/klog/v2/ktesting"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/cdi"
)

// A time-sliced GPU has no hardware memory cap: the CDI spec of a claim
// granted memoryMiB tells its container the budget, in MiB and as the
// fraction for vLLM's --gpu-memory-utilization (an H200 has 143771 MiB);
// it survives a restart that rebuilds the spec; a claim granted no budget
// gets none.
func TestPreparedSpecCarriesTheBudget(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, "hgx-h200")
	s := e.mustStart()
	if _, err := s.Prepare(ctx, allocated("a", []string{"gpu-0"}, member("Default", 40960), share(40960))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prepare(ctx, allocated("plain", []string{"gpu-1"})); err != nil {
		t.Fatal(err)
	}
	want := []string{gpuv1.EnvMemoryBudgetMiB + "=40960", gpuv1.EnvMemoryFraction + "=0.2848"}
	check := func(phase string) {
		t.Helper()
		for _, d := range cdiSpec(t, e, "uid-a").Devices {
			for _, w := range want {
				if !slices.Contains(d.ContainerEdits.Env, w) {
					t.Errorf("%s: device %s env %v lacks %s", phase, d.Name, d.ContainerEdits.Env, w)
				}
			}
		}
		for _, d := range cdiSpec(t, e, "uid-plain").Devices {
			if len(d.ContainerEdits.Env) != 1 {
				t.Errorf("%s: claim without memoryMiB: env %v, want NVIDIA_VISIBLE_DEVICES only", phase, d.ContainerEdits.Env)
			}
		}
	}
	check("prepared")
	w, err := cdi.NewWriter(e.cdiDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Remove("uid-a"); err != nil {
		t.Fatal(err)
	}
	e.mustStart() // rebuilds the missing spec from the checkpoint
	check("rebuilt after restart")
}
