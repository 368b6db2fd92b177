package schedule

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// nightOptions change the week-swap scenario's night pool that nightWorkloads builds.
type nightOptions struct {
	// cp is the control plane to build on; nil starts a default one.
	cp *framework.ControlPlane
	// llama and qwen change md-llama70b / md-qwen32b before they are created.
	llama, qwen func(*appsv1.Deployment)
	// gpus is the node's GPUs; 0 means the scenario's 10.
	gpus int
}

// nightWorkloads is the week-swap scenario's pool on Monday before 08:00, without a schedule:
// qwen32b (6 GPUs) and md-bge-embed (2 GPUs) run and are ready, llama70b
// (8 GPUs) is stopped.
func nightWorkloads(t *testing.T, start time.Time, o nightOptions) (*env, *observer) {
	t.Helper()
	nodes := map[string]int{"gpu-node-0": 10}
	if o.gpus != 0 {
		nodes["gpu-node-0"] = o.gpus
	}
	var e *env
	if o.cp != nil {
		e = newEnvOn(t, o.cp, start, nodes)
	} else {
		e = newEnv(t, start, nodes)
	}
	obs := startObserver(t, e.cp.Client, ns)
	e.gpuDeploymentWith("md-llama70b", 0, 8, o.llama)
	e.gpuDeploymentWith("md-qwen32b", 1, 6, o.qwen)
	e.gpuDeployment("md-bge-embed", 1, 2)
	e.waitReady("md-qwen32b", 1)
	e.waitReady("md-bge-embed", 1)
	return e, obs
}

// weekSchedule is examples/deployschedule-week.yaml as an object to adapt.
func weekSchedule(t *testing.T) *v1alpha1.DeploySchedule {
	t.Helper()
	var ds v1alpha1.DeploySchedule
	if err := yaml.UnmarshalStrict([]byte(readExample(t, "deployschedule-week.yaml")), &ds); err != nil {
		t.Fatalf("week example: %v", err)
	}
	return &ds
}

// stateOf returns the state a window sets for a target.
func stateOf(t *testing.T, ds *v1alpha1.DeploySchedule, window, target string) *v1alpha1.TargetState {
	t.Helper()
	for i := range ds.Spec.Windows {
		w := &ds.Spec.Windows[i]
		if w.Name != window {
			continue
		}
		for j := range w.States {
			if w.States[j].Target == target {
				return &w.States[j]
			}
		}
	}
	t.Fatalf("window %s sets no state for %s", window, target)
	return nil
}

// createScheduleObject creates a DeploySchedule built in Go.
func (e *env) createScheduleObject(ds *v1alpha1.DeploySchedule) {
	e.t.Helper()
	ds.Namespace = ns
	data, err := yaml.Marshal(ds)
	if err != nil {
		e.t.Fatal(err)
	}
	e.createSchedule(string(data))
}

// updateSchedule changes a schedule's spec or metadata, retrying on the
// conflicts the controller's status writes cause.
func (e *env) updateSchedule(name string, mutate func(*v1alpha1.DeploySchedule)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds := e.schedule(name)
		mutate(ds)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
		u.SetKind("DeploySchedule")
		_, err = e.cp.Dynamic.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Update(e.ctx, u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("update schedule %s: %v", name, err)
	}
}

// applyNow sets the rota.dev/apply-now annotation, as `kubectl annotate` would.
func (e *env) applyNow(name, value string) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, gpuv1.ApplyNowAnnotation, value)
	if _, err := e.cp.Dynamic.Resource(v1alpha1.DeploySchedulesResource).Namespace(ns).Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("apply-now on %s: %v", name, err)
	}
}

// scaleByHand sets a Deployment's replicas as a person with kubectl scale would.
func (e *env) scaleByHand(name string, replicas int32) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := e.cp.Client.AppsV1().Deployments(ns).Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("scale %s: %v", name, err)
	}
}

// pods lists the pods of an app (terminating ones included).
func (e *env) pods(app string) []v1.Pod {
	e.t.Helper()
	list, err := e.cp.Client.CoreV1().Pods(ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

func (e *env) replicas(name string) int32 { return ptr.Deref(e.deployment(name).Spec.Replicas, 1) }

// waitTarget advances the clock until the target's status satisfies ok and
// returns that status.
func (e *env) waitTarget(schedule, target, what string, maxSteps int, ok func(v1alpha1.TargetStatus) bool) v1alpha1.TargetStatus {
	e.t.Helper()
	var st v1alpha1.TargetStatus
	e.advance(target+" "+what, maxSteps, func() (bool, string) {
		st = e.targetStatus(schedule, target)
		return ok(st), describe(st)
	})
	return st
}

// waitReason advances the clock until the target reports phase/reason.
func (e *env) waitReason(schedule, target string, phase v1alpha1.TargetPhase, reason string, maxSteps int) v1alpha1.TargetStatus {
	e.t.Helper()
	return e.waitTarget(schedule, target, string(phase)+"/"+reason, maxSteps, func(st v1alpha1.TargetStatus) bool {
		return st.Phase == phase && st.Reason == reason
	})
}

func describe(st v1alpha1.TargetStatus) string {
	return fmt.Sprintf("%s/%s %q steps=%s", st.Phase, st.Reason, st.Message, describeSteps(st.Steps))
}

func describeSteps(steps []v1alpha1.TransitionStep) string {
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "[%s %s %s/%s] ", s.Action, s.Key, s.Phase, s.Reason)
	}
	return b.String()
}

// expectMessage fails unless the message holds every want.
func expectMessage(t *testing.T, what, msg string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: message %q does not say %q", what, msg, w)
		}
	}
}

// expectTerminal checks what a person reading the target's status sees: the
// phase, the reason, and a message that names the problem and ends with the
// fix.
func expectTerminal(t *testing.T, st v1alpha1.TargetStatus, phase v1alpha1.TargetPhase, reason string, wants ...string) {
	t.Helper()
	t.Logf("target %s: %s/%s: %s", st.Name, st.Phase, st.Reason, st.Message)
	if st.Phase != phase || st.Reason != reason {
		t.Errorf("target %s: %s/%s, want %s/%s (%s)", st.Name, st.Phase, st.Reason, phase, reason, st.Message)
	}
	expectMessage(t, "target "+st.Name, st.Message, append([]string{"Fix: "}, wants...)...)
}

// waitEvent waits (in real time: the recorder writes Events asynchronously)
// for an Event about the schedule with the given type and reason whose
// message holds every want, and returns it.
func (e *env) waitEvent(schedule, eventType, reason string, wants ...string) v1.Event {
	e.t.Helper()
	var found v1.Event
	sel := fields.Set{"involvedObject.kind": "DeploySchedule", "involvedObject.name": schedule}.AsSelector().String()
	framework.WaitFor(e.t, fmt.Sprintf("%s Event %s on %s saying %q", eventType, reason, schedule, wants),
		func(ctx context.Context) (bool, string, error) {
			list, err := e.cp.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				return false, "", err
			}
			var seen []string
			for _, ev := range list.Items {
				seen = append(seen, ev.Type+"/"+ev.Reason)
				if ev.Type != eventType || ev.Reason != reason {
					continue
				}
				if slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(ev.Message, w) }) {
					continue
				}
				found = ev
				return true, "", nil
			}
			return false, strings.Join(seen, ", "), nil
		})
	return found
}

// expectUntouched fails if the observer saw a Deployment's replicas change
// or the controller left its key on it.
func (e *env) expectUntouched(obs *observer, names ...string) {
	e.t.Helper()
	for _, name := range names {
		if n := obs.scaleChanges(name); n != 0 {
			e.t.Errorf("%s: replicas changed %d times, want untouched", name, n)
		}
		if key := e.deployment(name).Annotations[gpuv1.TransitionKeyAnnotation]; key != "" {
			e.t.Errorf("%s carries transition key %s, want untouched", name, key)
		}
	}
}
