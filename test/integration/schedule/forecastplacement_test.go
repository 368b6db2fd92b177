package schedule

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/schedule/forecast"
	"github.com/rota-dev/rota/test/integration/framework"
)

// mixedSchedule runs batch at night; by day chat and rerank replace it,
// and chat pauses over lunch. Every workload asks for 4 H100s, else 4
// A100s.
const mixedSchedule = `apiVersion: rota.dev/v1alpha1
kind: DeploySchedule
metadata: {name: mixed-pool, namespace: serving}
spec:
  timeZone: Asia/Ho_Chi_Minh
  mode: Enforce
  transitionOrder: ReleaseFirst
  targets:
  - name: batch
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: batch}
    defaultState: Running
  - name: chat
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: chat}
    defaultState: Stopped
  - name: rerank
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: rerank}
    defaultState: Stopped
  windows:
  - name: day
    priority: 10
    recurring: {cron: "0 8 * * 1-5", duration: 10h}
    states:
    - {target: batch, desiredState: Stopped}
    - {target: chat, desiredState: Running}
    - {target: rerank, desiredState: Running}
  - name: lunch
    priority: 100
    recurring: {cron: "0 12 * * 1-5", duration: 2h}
    states:
    - {target: chat, desiredState: Stopped}
`

// tieredDeployment is a Deployment whose pods each ask for gpus GPUs of
// the first model of models a node has room for.
func (e *env) tieredDeployment(name string, replicas int32, gpus int64, models ...string) {
	e.t.Helper()
	tiers := make([]framework.Tier, len(models))
	for i, m := range models {
		tiers[i] = framework.ModelTier(m)
	}
	tmpl := framework.TieredClaimTemplate(ns, name+"-tiered", tiers...)
	for i := range tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable {
		tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable[i].Count = gpus
	}
	if _, err := e.cp.Client.ResourceV1().ResourceClaimTemplates(ns).Create(e.ctx, tmpl, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.gpuDeploymentWith(name, replicas, gpus, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To(tmpl.Name)
	})
}

// allocatedByModel is what the scheduler placed: the GPUs per model that
// allocated claims hold, and per workload (the app of the claim's pod).
func (e *env) allocatedByModel(models map[string]string) (map[string]int, map[string]string) {
	e.t.Helper()
	claims, err := e.cp.Client.ResourceV1().ResourceClaims(ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	total, perApp := map[string]int{}, map[string]map[string]int{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil || c.DeletionTimestamp != nil || len(c.Status.ReservedFor) == 0 {
			continue
		}
		app := appOf(c.Status.ReservedFor[0].Name)
		for _, r := range c.Status.Allocation.Devices.Results {
			m := models[r.Pool]
			total[m]++
			if perApp[app] == nil {
				perApp[app] = map[string]int{}
			}
			perApp[app][m]++
		}
	}
	out := map[string]string{}
	for app, per := range perApp {
		out[app] = modelText(per)
	}
	return total, out
}

// appOf is the Deployment of a pod named <deployment>-<hash>-<id>.
func appOf(pod string) string {
	parts := strings.Split(pod, "-")
	if len(parts) < 3 {
		return pod
	}
	return strings.Join(parts[:len(parts)-2], "-")
}

// modelText renders GPUs per model: "A100=4 H100=2".
func modelText(per map[string]int) string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(per)) {
		if per[m] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", m, per[m]))
		}
	}
	return strings.Join(parts, " ")
}

// TestForecastMatchesScheduler runs one day of a schedule on 8 H100s and 4
// A100s through the forecast and through the real scheduler, and compares
// the GPUs per model, and per workload, window by window.
//
// By hand: md-bge-embed (2 GPUs, H100 first) runs all along on the H100
// node, its first tier; batch takes 4 more H100s at night. At 08:00 batch
// stops, chat takes 4 H100s and rerank, started after it, finds 2 H100s
// left and falls back to the A100s. Over lunch chat stops and rerank stays
// on its A100s (a running pod does not move), until 18:00.
func TestForecastMatchesScheduler(t *testing.T) {
	e := newEnvGPUs(t, framework.StartControlPlane(t), at(19, 0, 0), map[string][]framework.GPU{
		"n1": framework.GPUs(framework.H100, 8),
		"n2": framework.GPUs(framework.A100, 4),
	})
	poolModel := map[string]string{"n1": "H100", "n2": "A100"}
	e.tieredDeployment("md-bge-embed", 1, 2, "H100", "A100")
	e.waitReady("md-bge-embed", 1)
	e.tieredDeployment("batch", 1, 4, "H100", "A100")
	e.tieredDeployment("chat", 0, 4, "H100", "A100")
	e.tieredDeployment("rerank", 0, 4, "H100", "A100")
	e.waitReady("batch", 1)
	e.createSchedule(mixedSchedule)

	objs, skipped, err := forecast.ReadCluster(e.ctx, e.cp.Client, e.cp.Dynamic, forecast.Sources{})
	if err != nil || len(skipped) > 0 {
		t.Fatalf("read the cluster: %v, skipped %v", err, skipped)
	}
	in, err := forecast.Build(objs, at(19, 0, 0), at(20, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	f, err := forecast.Run(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	const sched = ns + "/mixed-pool/"
	type window struct {
		at                  time.Time
		total               string
		batch, chat, rerank string
	}
	want := []window{
		{at(19, 0, 0), "A100=0 H100=6", "H100=4", "", ""},
		{at(19, 8, 0), "A100=4 H100=6", "", "H100=4", "A100=4"},
		{at(19, 12, 0), "A100=4 H100=2", "", "", "A100=4"},
		{at(19, 14, 0), "A100=4 H100=6", "", "H100=4", "A100=4"},
		{at(19, 18, 0), "A100=0 H100=6", "H100=4", "", ""},
	}
	// The forecast, against the count by hand.
	if len(f.Segments) != len(want) || len(f.Overcommits) != 0 {
		t.Fatalf("%d segments, over-commits %+v; want %d segments and none", len(f.Segments), f.Overcommits, len(want))
	}
	forecasts := make([]string, len(want))
	for i, seg := range f.Segments {
		forecasts[i] = fmt.Sprintf("A100=%d H100=%d batch[%s] chat[%s] rerank[%s]", seg.Demand["A100"], seg.Demand["H100"],
			modelText(seg.Loads[sched+"batch"]), modelText(seg.Loads[sched+"chat"]), modelText(seg.Loads[sched+"rerank"]))
		w := want[i]
		if exp := fmt.Sprintf("%s batch[%s] chat[%s] rerank[%s]", w.total, w.batch, w.chat, w.rerank); !seg.From.Equal(w.at) || forecasts[i] != exp {
			t.Errorf("forecast from %s: %s, want from %s: %s", seg.From.In(zone).Format("15:04"), forecasts[i], w.at.Format("15:04"), exp)
		}
	}
	if len(f.Fallbacks) != 1 || f.Fallbacks[0].Load != sched+"rerank" || f.Fallbacks[0].Model != "A100" || f.Fallbacks[0].Tier != "2/2 a100" ||
		!f.Fallbacks[0].From.Equal(at(19, 8, 0)) || !f.Fallbacks[0].To.Equal(at(19, 18, 0)) {
		t.Errorf("fallbacks %+v, want rerank on its A100 tier 08:00-18:00", f.Fallbacks)
	}

	// The scheduler, window by window.
	e.startController(nil)
	for i, w := range want {
		if i > 0 {
			e.clock.SetTime(w.at)
		}
		e.convergedSince("mixed-pool", w.at, 400)
		e.advance(fmt.Sprintf("placements from %s as forecast", w.at.Format("15:04")), 200, func() (bool, string) {
			total, apps := e.allocatedByModel(poolModel)
			got := fmt.Sprintf("A100=%d H100=%d batch[%s] chat[%s] rerank[%s]", total["A100"], total["H100"], apps["batch"], apps["chat"], apps["rerank"])
			return got == forecasts[i], fmt.Sprintf("scheduler %s, forecast %s (bge %s)", got, forecasts[i], apps["md-bge-embed"])
		})
		t.Logf("%s: scheduler and forecast agree: %s", w.at.Format("15:04"), forecasts[i])
	}
}
