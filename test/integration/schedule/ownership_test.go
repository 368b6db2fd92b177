package schedule

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
	"github.com/rota-dev/rota/test/integration/framework"
)

// otherTeam names md-qwen32b, which the week schedule already drives, and
// wants it stopped now. Its name sorts after the week schedule's, so the
// week schedule owns the workload even when both were created in the same
// second (creation timestamps have whole seconds).
const otherTeam = `apiVersion: rota.dev/v1alpha1
kind: DeploySchedule
metadata: {name: other-team, namespace: serving}
spec:
  timeZone: Asia/Ho_Chi_Minh
  targets:
  - name: batch
    workloadRef: {apiVersion: apps/v1, kind: Deployment, name: md-qwen32b}
    defaultState: Stopped
    defaultAllowDowntime: true
`

// A second schedule naming a workload the first one drives is refused with
// TargetOwned and never touches it; the first keeps driving it.
func TestTargetOwnedBySecondSchedule(t *testing.T) {
	e, obs := nightPool(t, at(19, 7, 0))
	e.createSchedule(otherTeam)
	e.startController(nil)
	batch := e.waitReason("other-team", "batch", v1alpha1.TargetPhaseFailed, controller.ReasonTargetOwned, 50)
	expectTerminal(t, batch, v1alpha1.TargetPhaseFailed, controller.ReasonTargetOwned,
		"Deployment md-qwen32b is already driven by DeploySchedule "+weekName+" (created first); this schedule leaves it alone",
		"Fix: Remove the target from one of the two schedules; the schedule created first keeps the workload.")
	e.waitEvent("other-team", v1.EventTypeWarning, controller.ReasonTargetOwned, "target batch: Failed")
	e.convergedSince(weekName, at(19, 7, 0), 50)
	e.tick(12)
	e.expectUntouched(obs, "md-qwen32b")
	if r := e.replicas("md-qwen32b"); r != 1 {
		t.Errorf("qwen32b replicas %d, want 1", r)
	}

	// The first schedule keeps the workload: its 08:00 stop runs, the second
	// schedule still plans nothing for it.
	e.clock.SetTime(at(19, 8, 0))
	e.convergedSince(weekName, at(19, 8, 0), 400)
	key := e.deployment("md-qwen32b").Annotations[gpuv1.TransitionKeyAnnotation]
	if week := e.schedule(weekName); !strings.HasPrefix(key, string(week.UID)+"/qwen32b/") {
		t.Errorf("qwen32b last changed by step %q, want one of %s (%s)", key, weekName, week.UID)
	}
	batch = e.targetStatus("other-team", "batch")
	if batch.Reason != controller.ReasonTargetOwned || len(batch.Steps) != 0 {
		t.Errorf("other-team after 08:00: %s, want TargetOwned with no steps", describe(batch))
	}
	if n := obs.scaleChanges("md-qwen32b"); n != 1 {
		t.Errorf("qwen32b scale changed %d times, want once (the week schedule's stop)", n)
	}
}

// A second schedule naming a workload is refused when it is written, with
// the schedule that drives it named; the controller's TargetOwned (above)
// is left for two schedules created at the same moment.
func TestSecondOwnerRefusedAtAdmission(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.DeploySchedulesNamespace("serving"))
	applyManifestFile(t, cp, "manifests/schedule-controller/ownership-policy.yaml")
	r := cp.Dynamic.Resource(v1alpha1.DeploySchedulesResource).Namespace("serving")
	ctx := context.Background()
	create := func(doc string) error {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		_, err := r.Create(ctx, &u, metav1.CreateOptions{})
		return err
	}
	if err := create(readExample(t, "deployschedule-week.yaml")); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "the ownership policy to refuse the second schedule", func(ctx context.Context) (bool, string, error) {
		err := create(otherTeam)
		if err == nil {
			// The API server loads a new policy through an informer: until
			// it has, the create goes through. Undo it and try again.
			if err := r.Delete(ctx, "other-team", metav1.DeleteOptions{}); err != nil {
				return false, "", err
			}
			return false, "other-team was created: the policy is not loaded yet", nil
		}
		want := "spec.targets: Deployment md-qwen32b is already driven by DeploySchedule " + weekName +
			" of namespace serving; a workload has one schedule: remove it from one of the two"
		return strings.Contains(err.Error(), want) && strings.Contains(err.Error(), "rota-deployschedule-owner"), err.Error(), nil
	})

	// A schedule of other workloads is created; adding a driven workload
	// to it is refused; changing its windows is not.
	free := strings.Replace(otherTeam, "md-qwen32b", "md-batch", 1)
	if err := create(free); err != nil {
		t.Fatalf("a schedule of another workload: %v", err)
	}
	other, err := r.Get(ctx, "other-team", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	targets, _, _ := unstructured.NestedSlice(other.Object, "spec", "targets")
	steal := other.DeepCopy()
	_ = unstructured.SetNestedSlice(steal.Object, append(targets, map[string]any{
		"name": "llama", "workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "md-llama70b"},
		"defaultState": "Stopped", "defaultAllowDowntime": true,
	}), "spec", "targets")
	if _, err := r.Update(ctx, steal, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "Deployment md-llama70b is already driven by DeploySchedule "+weekName) {
		t.Errorf("adding md-llama70b to other-team: %v, want refused naming %s", err, weekName)
	}
	week, err := r.Get(ctx, weekName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(week.Object, "Europe/Berlin", "spec", "timeZone")
	if _, err := r.Update(ctx, week, metav1.UpdateOptions{}); err != nil {
		t.Errorf("changing the week schedule's time zone: %v", err)
	}
	// Once the week schedule is gone, its workload may be scheduled again.
	if err := r.Delete(ctx, weekName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "md-qwen32b to be free for another schedule", func(ctx context.Context) (bool, string, error) {
		err := create(otherTeam)
		if apierrors.IsAlreadyExists(err) {
			// other-team exists (with md-batch): take qwen32b on a new name.
			err = create(strings.Replace(otherTeam, "name: other-team", "name: other-team-2", 1))
		}
		return err == nil, fmt.Sprint(err), nil
	})
}
