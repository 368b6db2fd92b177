package integration

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/test/integration/framework"
)

var (
	deploySchedules = schema.GroupVersionResource{Group: "rota.dev", Version: "v1alpha1", Resource: "deployschedules"}
	gpuReservations = schema.GroupVersionResource{Group: "rota.dev", Version: "v1alpha1", Resource: "gpureservations"}
	gpuQuotas       = schema.GroupVersionResource{Group: "rota.dev", Version: "v1alpha1", Resource: "gpuquotas"}
)

const validSchedule = `
apiVersion: rota.dev/v1alpha1
kind: DeploySchedule
metadata: {name: gpu-pool, namespace: serving}
spec:
  timeZone: Asia/Ho_Chi_Minh
  targets:
  - name: llama70b
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-llama70b}
    defaultState: Stopped
    defaultAllowDowntime: true
  - name: qwen32b
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-qwen32b}
    defaultState: Running
  windows:
  - name: business-hours
    priority: 10
    recurring: {cron: "0 8 * * 1-5", duration: 10h}
    states:
    - {target: llama70b, desiredState: Running, replicas: 2}
    - {target: qwen32b, desiredState: Stopped}
  - name: maint-wed
    priority: 100
    oneShot: {activeFrom: "2026-10-21T13:00:00+07:00", activeUntil: "2026-10-21T15:00:00+07:00"}
    states:
    - {target: llama70b, desiredState: Stopped, allowDowntime: true}
    - {target: qwen32b, desiredState: Running}
`

const validReservation = `
apiVersion: rota.dev/v1alpha1
kind: GPUReservation
metadata: {name: h200-shared, namespace: serving}
spec:
  nodeName: node-h200
  count: 1
  mode: TimeSliced
  headroom: "0.95"
  members:
  - name: chat
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-chat}
  - name: batch
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-batch}
`

const validQuota = `
apiVersion: rota.dev/v1alpha1
kind: GPUQuota
metadata: {name: team-a}
spec:
  overLimit: Wait
  models:
  - {model: H100, guaranteed: 8, borrowingLimit: 4, lendingLimit: 6}
  - {model: H200, guaranteed: 0}
`

// edit changes one decoded object before it is sent.
type edit func(obj map[string]any)

// set replaces the value at a path of map keys and list indexes.
func set(path string, value any) edit {
	return func(obj map[string]any) { walk(obj, path, func(parent any, key string) { assign(parent, key, value) }) }
}

// del removes the value at a path.
func del(path string) edit {
	return func(obj map[string]any) {
		walk(obj, path, func(parent any, key string) { delete(parent.(map[string]any), key) })
	}
}

func walk(obj map[string]any, path string, at func(parent any, key string)) {
	keys := strings.Split(path, ".")
	var cur any = obj
	for _, k := range keys[:len(keys)-1] {
		cur = child(cur, k)
	}
	at(cur, keys[len(keys)-1])
}

func child(cur any, key string) any {
	if l, ok := cur.([]any); ok {
		return l[index(key)]
	}
	return cur.(map[string]any)[key]
}

func assign(parent any, key string, value any) {
	if l, ok := parent.([]any); ok {
		l[index(key)] = value
		return
	}
	parent.(map[string]any)[key] = value
}

func index(key string) int {
	i := 0
	for _, c := range key {
		i = i*10 + int(c-'0')
	}
	return i
}

// crdCase is one object sent to the API server (a dry run) and what it
// must answer.
type crdCase struct {
	gvr   schema.GroupVersionResource
	base  string
	edits []edit
	// wantErr holds substrings of the apiserver's error, the field path first;
	// empty means the object must be accepted.
	wantErr []string
}

// gpuQuotaCases: the GPUQuota schema (issue #41 point 1). Its name is the
// tenant's namespace, so a name that cannot be one is refused; a tenant
// lends only what it is guaranteed.
var gpuQuotaCases = map[string]crdCase{
	"valid quota":                  {gvr: gpuQuotas, base: validQuota},
	"quota without limits":         {gvr: gpuQuotas, base: validQuota, edits: []edit{del("spec.models.0.borrowingLimit"), del("spec.models.0.lendingLimit"), del("spec.overLimit")}},
	"lending all of the guarantee": {gvr: gpuQuotas, base: validQuota, edits: []edit{set("spec.models.0.lendingLimit", 8)}},
	"lending more than is guaranteed": {
		gvr: gpuQuotas, base: validQuota, edits: []edit{set("spec.models.0.lendingLimit", 9)},
		wantErr: []string{"spec.models[0].lendingLimit", "lendingLimit cannot exceed guaranteed"},
	},
	"quota named as no namespace can be": {
		gvr: gpuQuotas, base: validQuota, edits: []edit{set("metadata.name", "team.a")},
		wantErr: []string{"the name is the tenant's namespace: a DNS label"},
	},
	"negative guarantee": {
		gvr: gpuQuotas, base: validQuota, edits: []edit{set("spec.models.1.guaranteed", -1)},
		wantErr: []string{"spec.models[1].guaranteed", "greater than or equal to 0"},
	},
	"model listed twice": {
		gvr: gpuQuotas, base: validQuota, edits: []edit{set("spec.models.1.model", "H100")},
		wantErr: []string{"spec.models[1]", "Duplicate value"},
	},
	"no models": {
		gvr: gpuQuotas, base: validQuota, edits: []edit{set("spec.models", []any{})},
		wantErr: []string{"spec.models", "should have at least 1 items"},
	},
	"unknown over-limit policy": {
		gvr: gpuQuotas, base: validQuota, edits: []edit{set("spec.overLimit", "Evict")},
		wantErr: []string{"spec.overLimit", "Unsupported value"},
	},
}

func TestCRDValidation(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.Namespace("serving"))

	cases := map[string]crdCase{
		"valid schedule": {gvr: deploySchedules, base: validSchedule},
		"schedule without time zone": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{del("spec.timeZone")},
			wantErr: []string{"spec.timeZone", "Required value"},
		},
		"unknown mode": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{set("spec.mode", "Sometimes")},
			wantErr: []string{"spec.mode", "Unsupported value"},
		},
		"zero replicas in a window": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{set("spec.windows.0.states.0.replicas", 0)},
			wantErr: []string{"spec.windows[0].states[0].replicas", "use desiredState Stopped"},
		},
		"zero default replicas": {
			gvr: deploySchedules, base: validSchedule,
			edits:   []edit{set("spec.targets.1.defaultReplicas", 0)},
			wantErr: []string{"spec.targets[1].defaultReplicas", "at least 1"},
		},
		"replicas on a stopped state": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{set("spec.windows.0.states.1.replicas", 3)},
			wantErr: []string{"spec.windows[0].states[1].replicas", "only to desiredState Running"},
		},
		"both recurring and one-shot": {
			gvr: deploySchedules, base: validSchedule,
			edits:   []edit{set("spec.windows.1.recurring", map[string]any{"cron": "0 1 * * *", "duration": "1h"})},
			wantErr: []string{"spec.windows[1]", "exactly one of recurring or oneShot"},
		},
		"neither recurring nor one-shot": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{del("spec.windows.0.recurring")},
			wantErr: []string{"spec.windows[0]", "exactly one of recurring or oneShot"},
		},
		"one-shot ending before it starts": {
			gvr: deploySchedules, base: validSchedule,
			edits:   []edit{set("spec.windows.1.oneShot.activeUntil", "2026-10-21T12:00:00+07:00")},
			wantErr: []string{"spec.windows[1].oneShot.activeUntil", "activeFrom must be before activeUntil"},
		},
		"empty one-shot": {
			gvr: deploySchedules, base: validSchedule,
			edits:   []edit{set("spec.windows.1.oneShot.activeUntil", "2026-10-21T13:00:00+07:00")},
			wantErr: []string{"spec.windows[1].oneShot.activeUntil", "activeFrom must be before activeUntil"},
		},
		"duration not in Go syntax": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{set("spec.windows.0.recurring.duration", "10 hours")},
			wantErr: []string{"spec.windows[0].recurring.duration", "positive Go duration"},
		},
		"zero duration": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{set("spec.windows.0.recurring.duration", "0s")},
			wantErr: []string{"spec.windows[0].recurring.duration", "positive Go duration"},
		},
		"duplicate target names": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{set("spec.targets.1.name", "llama70b")},
			wantErr: []string{"spec.targets[1]", "Duplicate value"},
		},
		"duplicate window names": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{set("spec.windows.1.name", "business-hours")},
			wantErr: []string{"spec.windows[1]", "Duplicate value"},
		},
		"two targets on one workload": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{set("spec.targets.1.workloadRef.name", "md-llama70b")},
			wantErr: []string{"spec.targets", "same workload"},
		},
		"state naming an undeclared target": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{set("spec.windows.1.states.1.target", "mistral")},
			wantErr: []string{"spec.windows", "must name a target declared in spec.targets"},
		},
		"unsupported workload kind": {
			gvr: deploySchedules, base: validSchedule, edits: []edit{set("spec.targets.0.workloadRef.kind", "Job")},
			wantErr: []string{"spec.targets[0].workloadRef.kind", "Unsupported value"},
		},
		"valid reservation": {gvr: gpuReservations, base: validReservation},
		"reservation by UUIDs": {
			gvr: gpuReservations, base: validReservation,
			edits: []edit{del("spec.count"), set("spec.deviceUUIDs", []any{"GPU-1", "GPU-2"})},
		},
		"headroom of one": {gvr: gpuReservations, base: validReservation, edits: []edit{set("spec.headroom", "1")}},
		"headroom zero": {
			gvr: gpuReservations, base: validReservation, edits: []edit{set("spec.headroom", "0.0")},
			wantErr: []string{"spec.headroom", "decimal in (0, 1]"},
		},
		"headroom above one": {
			gvr: gpuReservations, base: validReservation, edits: []edit{set("spec.headroom", "1.5")},
			wantErr: []string{"spec.headroom", "decimal in (0, 1]"},
		},
		"count and UUIDs": {
			gvr: gpuReservations, base: validReservation, edits: []edit{set("spec.deviceUUIDs", []any{"GPU-1"})},
			wantErr: []string{"spec", "exactly one of count or deviceUUIDs"},
		},
		"neither count nor UUIDs": {
			gvr: gpuReservations, base: validReservation, edits: []edit{del("spec.count")},
			wantErr: []string{"spec", "exactly one of count or deviceUUIDs"},
		},
		"zero GPUs": {
			gvr: gpuReservations, base: validReservation, edits: []edit{set("spec.count", 0)},
			wantErr: []string{"spec.count", "should be greater than or equal to 1"},
		},
		"no members": {
			gvr: gpuReservations, base: validReservation, edits: []edit{set("spec.members", []any{})},
			wantErr: []string{"spec.members", "should have at least 1 items"},
		},
		"unknown mode on reservation": {
			gvr: gpuReservations, base: validReservation, edits: []edit{set("spec.mode", "Shared")},
			wantErr: []string{"spec.mode", "Unsupported value"},
		},
	}
	for name, tc := range gpuQuotaCases {
		cases[name] = tc
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(tc.base), &obj); err != nil {
				t.Fatal(err)
			}
			for _, e := range tc.edits {
				e(obj)
			}
			u := &unstructured.Unstructured{Object: obj}
			_, err := cp.Dynamic.Resource(tc.gvr).Namespace(u.GetNamespace()).
				Create(context.Background(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("valid object rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid object accepted; want an error with %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err.Error(), want)
				}
			}
		})
	}
}

func TestReservationNodeIsImmutable(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.Namespace("serving"))
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(validReservation), &obj); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := cp.Dynamic.Resource(gpuReservations).Namespace("serving")
	created, err := client.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(created.Object, "node-other", "spec", "nodeName"); err != nil {
		t.Fatal(err)
	}
	_, err = client.Update(ctx, created, metav1.UpdateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.nodeName") || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("moving a reservation to another node: got %v, want an immutable spec.nodeName error", err)
	}
}
