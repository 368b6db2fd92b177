package security

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/events"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestScheduleControllerEventsOnlyItsOwn: issue #38 point 1. RBAC lets the
// schedule controller create and patch Events in every namespace; the
// shipped policy rota-schedule-controller-events lets its token write only
// the Events its code writes (about a DeploySchedule, a GPUReservation or
// a pod, in that object's namespace, from its own source) and patch only
// their count and times. The controller's own event recorder, as that
// ServiceAccount, goes through next to the attempts.
func TestScheduleControllerEventsOnlyItsOwn(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := context.Background()
	e.cp.ApplyManifests(t, "manifests/schedule-controller/rbac.yaml", "manifests/schedule-controller/events-policy.yaml")
	ctrl, err := kubernetes.NewForConfig(e.cp.ImpersonateServiceAccount("rota-system", "rota-schedule-controller"))
	if err != nil {
		t.Fatal(err)
	}
	createSchedule(t, e.cp.Dynamic, teamA, "week", "model")
	about := v1.ObjectReference{APIVersion: "rota.dev/v1alpha1", Kind: "DeploySchedule", Namespace: teamA, Name: "week"}
	event := func(ns string, change func(*v1.Event)) *v1.Event {
		ev := &v1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: ns, GenerateName: "week."},
			InvolvedObject: about, Type: v1.EventTypeNormal, Reason: "Transition", Message: "scaled model to 1",
			Source: v1.EventSource{Component: events.ControllerComponent}, Count: 1,
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
		}
		if change != nil {
			change(ev)
		}
		return ev
	}
	create := func(ns string, change func(*v1.Event)) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := ctrl.CoreV1().Events(ns).Create(ctx, event(ns, change), dryRun)
			return err
		}
	}
	framework.WaitFor(t, "the controller's RBAC and events policy to decide", func(ctx context.Context) (bool, string, error) {
		if err := create(teamA, nil)(ctx); err != nil {
			return false, err.Error(), nil
		}
		err := create("kube-system", func(ev *v1.Event) {
			ev.InvolvedObject = v1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "kube-system", Name: "etcd"}
		})(ctx)
		return err != nil, fmt.Sprint(err), nil
	})

	t.Run("the controller's own recorder writes and counts its events", func(t *testing.T) {
		recorder, stop, err := events.NewRecorder(ctx, ctrl, events.ControllerComponent)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		ds, err := e.cp.Dynamic.Resource(rotav1.DeploySchedulesResource).Namespace(teamA).Get(ctx, "week", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod, err := e.cp.Client.CoreV1().Pods(teamA).Create(ctx, gpuPod(teamA, "member", rotaScheduler), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Twice each: the second is a patch of the first's count.
		for range 2 {
			recorder.Event(ds, v1.EventTypeNormal, "Transition", "scaled model to 1")
			recorder.Event(pod, v1.EventTypeWarning, "PlacementMismatch", "placed outside its reservation")
		}
		framework.WaitFor(t, "both events counted twice", func(ctx context.Context) (bool, string, error) {
			list, err := e.cp.Client.CoreV1().Events(teamA).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			counts := map[string]int32{}
			for _, ev := range list.Items {
				counts[ev.InvolvedObject.Kind+"/"+ev.Reason] = ev.Count
			}
			return counts["DeploySchedule/Transition"] == 2 && counts["Pod/PlacementMismatch"] == 2, fmt.Sprint(counts), nil
		})
	})

	const policy = "rota-schedule-controller-events"
	l.hostile(t, "controller token writes an Event about a kube-system pod", create("kube-system", func(ev *v1.Event) {
		ev.InvolvedObject = v1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "kube-system", Name: "etcd"}
	}), policy, "in namespace kube-system")
	l.hostile(t, "controller token writes an Event about a Deployment", create(teamA, func(ev *v1.Event) {
		ev.InvolvedObject = v1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: teamA, Name: "model"}
	}), policy, "only about DeploySchedules, GPUReservations and pods")
	l.hostile(t, "controller token writes an Event about a node", create("default", func(ev *v1.Event) {
		ev.InvolvedObject = v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-1"}
	}), policy, "only about DeploySchedules, GPUReservations and pods")
	l.hostile(t, "controller token writes an Event as the kubelet", create(teamA, func(ev *v1.Event) {
		ev.Source = v1.EventSource{Component: "kubelet", Host: "node-1"}
	}), policy, "only from source rota-schedule-controller")
	l.hostile(t, "controller token writes an events.k8s.io Event about a Node", func(ctx context.Context) error {
		_, err := ctrl.EventsV1().Events(teamA).Create(ctx, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamA, GenerateName: "node."},
			EventTime:  metav1.NowMicro(), ReportingController: events.ControllerComponent, ReportingInstance: "x",
			Action: "Drain", Reason: "Drain", Type: v1.EventTypeWarning, Note: "draining",
			Regarding: v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-1"},
		}, dryRun)
		return err
	}, "forbidden")

	existing, err := e.cp.Client.CoreV1().Events(teamA).Create(ctx, event(teamA, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(change func(*v1.Event)) func(context.Context) error {
		return func(ctx context.Context) error {
			ev := existing.DeepCopy()
			change(ev)
			_, err := ctrl.CoreV1().Events(teamA).Update(ctx, ev, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	if err := patch(func(ev *v1.Event) { ev.Count = 2 })(ctx); err == nil {
		t.Error("the controller's token updated an Event; RBAC grants create and patch only")
	}
	patchTo := func(body string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := ctrl.CoreV1().Events(teamA).Patch(ctx, existing.Name, "application/merge-patch+json", []byte(body), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	if err := patchTo(`{"count":3,"message":"scaled model to 1"}`)(ctx); err != nil {
		t.Errorf("counting an existing event: %v", err)
	}
	l.hostile(t, "controller token re-points an existing Event at another object",
		patchTo(`{"involvedObject":{"apiVersion":"v1","kind":"Pod","namespace":"team-a","name":"other"}}`), policy, "may not change what an Event is about")
	l.hostile(t, "controller token turns an existing Event into a Warning with another reason",
		patchTo(`{"type":"Warning","reason":"Compromised"}`), policy, "may not change what an Event is about")
}

// createSchedule creates, as the cluster admin, scheduleObject.
func createSchedule(t *testing.T, c dynamic.Interface, ns, name, target string) {
	t.Helper()
	if _, err := c.Resource(rotav1.DeploySchedulesResource).Namespace(ns).Create(t.Context(), scheduleObject(ns, name, target), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// scheduleObject is a DeploySchedule that keeps the Deployment target
// running from 08:00 to 18:00 UTC.
func scheduleObject(ns, name, target string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rota.dev/v1alpha1", "kind": "DeploySchedule",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"timeZone": "UTC",
			"targets": []any{map[string]any{
				"name":         target,
				"workloadRef":  map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
				"defaultState": "Stopped",
			}},
			"windows": []any{map[string]any{
				"name": "day", "priority": int64(10),
				"recurring": map[string]any{"cron": "0 8 * * *", "duration": "10h"},
				"states":    []any{map[string]any{"target": target, "desiredState": "Running", "replicas": int64(1)}},
			}},
		},
	}}
}
