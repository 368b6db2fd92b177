package security

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/controller"
	"github.com/rota-dev/rota/test/integration/framework"
	"github.com/rota-dev/rota/test/integration/framework/leaderworkerset"
)

// TestScheduleControllerWritesOnlyTransitions: issue #38 point 1. RBAC lets
// the schedule controller update every Deployment, StatefulSet and
// LeaderWorkerSet in the cluster; the shipped policy
// rota-schedule-controller-writes lets its token change only what a
// transition changes (replicas, rota.dev/ annotations, a pod claim's
// template to a pinned copy of it), nowhere in the system namespaces, and
// create only pinned claim templates. The legitimate writes, shaped as
// pkg/schedule/controller makes them, go through next to the attempts.
func TestScheduleControllerWritesOnlyTransitions(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := context.Background()
	leaderworkerset.InstallCRD(t, e.cp)
	e.cp.ApplyManifests(t, "manifests/schedule-controller/rbac.yaml", "manifests/schedule-controller/writes-policy.yaml",
		"manifests/schedule-controller/namespaces-policy.yaml", "manifests/schedule-controller/tenant-rbac.yaml")
	// The cluster admin enables DeploySchedules in team-a only.
	enableDeploySchedules(t, e.cp.Client, teamA)
	aliceDyn, err := dynamic.NewForConfig(e.cp.ImpersonateUser(alice))
	if err != nil {
		t.Fatal(err)
	}
	bobDyn, err := dynamic.NewForConfig(e.cp.ImpersonateUser(bob))
	if err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, "namespace admins to be given DeploySchedules by aggregation", func(ctx context.Context) (bool, string, error) {
		_, err := aliceDyn.Resource(rotav1.DeploySchedulesResource).Namespace(teamA).Create(ctx, scheduleObject(teamA, "probe", "model"), dryRun)
		return err == nil, fmt.Sprint(err), nil
	})
	cfg := e.cp.ImpersonateServiceAccount("rota-system", "rota-schedule-controller")
	ctrl, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctrlDyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	for _, ns := range []string{"kube-system", teamA, teamB} {
		if _, err := e.cp.Client.AppsV1().Deployments(ns).Create(ctx, gpuDeployment(ns, "model"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.cp.Client.AppsV1().StatefulSets(teamA).Create(ctx, gpuStatefulSet(teamA, "db"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctrlDyn.Resource(controller.LeaderWorkerSetsResource).Namespace(teamA).Create(ctx, gpuLWS(teamA, "llm"), metav1.CreateOptions{}); err == nil {
		t.Fatal("the controller's token created a LeaderWorkerSet; RBAC should not allow it")
	}
	if _, err := e.cp.Dynamic.Resource(controller.LeaderWorkerSetsResource).Namespace(teamA).Create(ctx, gpuLWS(teamA, "llm"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// update reads the Deployment as the controller does and writes it back
	// with one change, as the controller's token.
	update := func(ns, name string, change func(*appsv1.Deployment)) func(context.Context) error {
		return func(ctx context.Context) error {
			d, err := ctrl.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(d)
			_, err = ctrl.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	transition := func(d *appsv1.Deployment) {
		d.Spec.Replicas = ptr.To[int32](3)
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, gpuv1.TransitionKeyAnnotation, "week/2026-12-07T08:00/acquire/0")
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, gpuv1.ReplicasBeforeStopAnnotation, "2")
	}
	pin := func(to string) func(*appsv1.Deployment) {
		return func(d *appsv1.Deployment) {
			transition(d)
			d.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To(to)
		}
	}
	framework.WaitFor(t, "the controller's RBAC and writes policy to decide", func(ctx context.Context) (bool, string, error) {
		if err := update(teamA, "model", transition)(ctx); err != nil {
			return false, err.Error(), nil
		}
		if err := update("kube-system", "model", transition)(ctx); err == nil {
			return false, "kube-system write allowed", nil
		}
		err := update(teamB, "model", transition)(ctx)
		return err != nil, fmt.Sprint(err), nil
	})

	t.Run("the writes a transition makes are allowed", func(t *testing.T) {
		for what, try := range map[string]func(context.Context) error{
			"scale with the transition key": update(teamA, "model", transition),
			"pin the claim template":        update(teamA, "model", pin("gpu-pin-0123456789")),
			"create the pinned template":    createPinned(ctrl, teamA, "gpu-pin-0123456789", "gpu"),
			"scale a StatefulSet":           updateStatefulSet(ctrl, teamA, "db", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](0) }),
			"scale a LeaderWorkerSet": updateLWS(ctrlDyn, teamA, "llm", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "replicas")
			}),
			"pin a LeaderWorkerSet's claims": updateLWS(ctrlDyn, teamA, "llm", setLWSClaimTemplate("gpu-pin-abcdef0123")),
		} {
			if err := try(ctx); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
		// A template already pinned is re-pinned to a new copy of the same one.
		setTemplate(t, e.cp.Client, teamA, "model", "gpu-pin-0123456789")
		if err := update(teamA, "model", pin("gpu-pin-fedcba9876"))(ctx); err != nil {
			t.Errorf("re-pin to a new copy: %v", err)
		}
		setTemplate(t, e.cp.Client, teamA, "model", "gpu")
	})

	const policy = "rota-schedule-controller-writes"
	l.hostile(t, "controller token swaps the image of a kube-system Deployment", update("kube-system", "model", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "evil.example.com/miner:latest"
	}), policy, "in namespace kube-system")
	l.hostile(t, "controller token scales a kube-system Deployment to zero", update("kube-system", "model", func(d *appsv1.Deployment) {
		d.Spec.Replicas = ptr.To[int32](0)
	}), policy, "in namespace kube-system")
	l.hostile(t, "controller token swaps a tenant workload's image", update(teamA, "model", func(d *appsv1.Deployment) {
		transition(d)
		d.Spec.Template.Spec.Containers[0].Image = "evil.example.com/miner:latest"
	}), policy, "may not change a pod template")
	l.hostile(t, "controller token mounts the host's root into a tenant workload", update(teamA, "model", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, v1.Volume{
			Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}},
		})
	}), policy, "may not change a pod template")
	l.hostile(t, "controller token runs a tenant workload as another ServiceAccount", update(teamA, "model", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.ServiceAccountName = "deployer"
	}), policy, "may not change a pod template")
	l.hostile(t, "controller token relabels a tenant workload's pods into a reservation", update(teamA, "model", func(d *appsv1.Deployment) {
		d.Spec.Template.Labels["member"] = "true"
	}), policy, "may not change a pod template")
	l.hostile(t, "controller token labels a tenant workload", update(teamA, "model", func(d *appsv1.Deployment) {
		metav1.SetMetaDataLabel(&d.ObjectMeta, "team", "b")
	}), policy, "only rota.dev/ annotations")
	l.hostile(t, "controller token writes a non-Rota annotation", update(teamA, "model", func(d *appsv1.Deployment) {
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, "deployment.kubernetes.io/revision", "99")
	}), policy, "only rota.dev/ annotations")
	l.hostile(t, "controller token pauses a tenant Deployment", update(teamA, "model", func(d *appsv1.Deployment) {
		d.Spec.Paused = true
	}), policy, "only spec.replicas and claim templates of a Deployment")
	l.hostile(t, "controller token points a claim at an arbitrary template", update(teamA, "model", pin("free-gpus")),
		policy, "pinned to a reservation")
	l.hostile(t, "controller token points a claim at another template's pinned copy", update(teamA, "model", pin("other-pin-0123456789")),
		policy, "pinned to a reservation")
	l.hostile(t, "controller token adds a claim to a tenant workload", update(teamA, "model", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.ResourceClaims = append(d.Spec.Template.Spec.ResourceClaims, v1.PodResourceClaim{Name: "more", ResourceClaimTemplateName: ptr.To("gpu-pin-0123456789")})
	}), policy, "may not add, remove, rename or reorder")
	l.hostile(t, "controller token stops a StatefulSet's rolling updates", updateStatefulSet(ctrl, teamA, "db", func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}), policy, "of a StatefulSet")
	l.hostile(t, "controller token swaps a LeaderWorkerSet's worker image", updateLWS(ctrlDyn, teamA, "llm", func(u *unstructured.Unstructured) {
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "leaderWorkerTemplate", "workerTemplate", "spec", "containers")
		containers[0].(map[string]any)["image"] = "evil.example.com/miner:latest"
		_ = unstructured.SetNestedSlice(u.Object, containers, "spec", "leaderWorkerTemplate", "workerTemplate", "spec", "containers")
	}), policy, "may not change a pod template")
	l.hostile(t, "controller token creates an unpinned claim template", createPinned(ctrl, teamA, "free-gpus", ""),
		policy, "only ResourceClaimTemplates pinned to a reservation")
	l.hostile(t, "controller token creates a claim template in kube-system", createPinned(ctrl, "kube-system", "gpu-pin-0123456789", "gpu"),
		policy, "in namespace kube-system")

	// Namespaces the cluster admin did not enable for DeploySchedules.
	l.hostile(t, "controller token scales a workload in a namespace not enabled for DeploySchedules", update(teamB, "model", func(d *appsv1.Deployment) {
		transition(d)
		d.Spec.Replicas = ptr.To[int32](0)
	}), policy, "has not enabled DeploySchedules there")
	l.hostile(t, "controller token pins claims in a namespace not enabled for DeploySchedules", update(teamB, "model", pin("gpu-pin-0123456789")),
		policy, "has not enabled DeploySchedules there")
	l.hostile(t, "controller token creates a pinned claim template in a namespace not enabled for DeploySchedules",
		createPinned(ctrl, teamB, "gpu-pin-0123456789", "gpu"), policy, "has not enabled DeploySchedules there")
	l.hostile(t, "tenant enables DeploySchedules in its own namespace", func(ctx context.Context) error {
		patch := []byte(`{"metadata":{"labels":{"` + gpuv1.DeploySchedulesNamespaceLabel + `":"` + gpuv1.DeploySchedulesEnabled + `"}}}`)
		_, err := e.bob.CoreV1().Namespaces().Patch(ctx, teamB, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}, "forbidden")
	l.hostile(t, "tenant creates a DeploySchedule in a namespace not enabled for it", func(ctx context.Context) error {
		_, err := bobDyn.Resource(rotav1.DeploySchedulesResource).Namespace(teamB).Create(ctx, scheduleObject(teamB, "week", "model"), metav1.CreateOptions{})
		return err
	}, "rota-deployschedule-namespaces", "namespace team-b is not enabled for DeploySchedules", "rota.dev/deploy-schedules=enabled")
	t.Run("a tenant creates a DeploySchedule where the admin enabled them", func(t *testing.T) {
		if _, err := aliceDyn.Resource(rotav1.DeploySchedulesResource).Namespace(teamA).Create(ctx, scheduleObject(teamA, "week", "model"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// enableDeploySchedules labels namespace as the cluster admin does.
func enableDeploySchedules(t *testing.T, c kubernetes.Interface, namespace string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"` + gpuv1.DeploySchedulesNamespaceLabel + `":"` + gpuv1.DeploySchedulesEnabled + `"}}}`)
	if _, err := c.CoreV1().Namespaces().Patch(t.Context(), namespace, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gpuDeployment is a Deployment of one pod with one claim from template "gpu".
func gpuDeployment(namespace, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: gpuPodTemplate(labels),
		},
	}
}

func gpuStatefulSet(namespace, name string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: gpuPodTemplate(labels),
		},
	}
}

func gpuPodTemplate(labels map[string]string) v1.PodTemplateSpec {
	p := framework.GPUPod("", "", "", "gpu")
	return v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: p.Spec}
}

// gpuLWS is a LeaderWorkerSet of groups of two, whose workers claim from
// template "gpu".
func gpuLWS(namespace, name string) *unstructured.Unstructured {
	pod := gpuPodTemplate(nil)
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pod)
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec": map[string]any{
			"replicas":             int64(1),
			"leaderWorkerTemplate": map[string]any{"size": int64(2), "workerTemplate": tmpl},
		},
	}}
	return u
}

// setTemplate points the Deployment's pod claim at template, as the
// cluster admin.
func setTemplate(t *testing.T, c kubernetes.Interface, ns, name, template string) {
	t.Helper()
	d, err := c.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To(template)
	if _, err := c.AppsV1().Deployments(ns).Update(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setLWSClaimTemplate(to string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		path := []string{"spec", "leaderWorkerTemplate", "workerTemplate", "spec", "resourceClaims"}
		claims, _, _ := unstructured.NestedSlice(u.Object, path...)
		claims[0].(map[string]any)["resourceClaimTemplateName"] = to
		_ = unstructured.SetNestedSlice(u.Object, claims, path...)
	}
}

func updateStatefulSet(c kubernetes.Interface, ns, name string, change func(*appsv1.StatefulSet)) func(context.Context) error {
	return func(ctx context.Context) error {
		s, err := c.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(s)
		_, err = c.AppsV1().StatefulSets(ns).Update(ctx, s, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
}

func updateLWS(c dynamic.Interface, ns, name string, change func(*unstructured.Unstructured)) func(context.Context) error {
	return func(ctx context.Context) error {
		r := c.Resource(controller.LeaderWorkerSetsResource).Namespace(ns)
		u, err := r.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(u)
		_, err = r.Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
}

// createPinned creates, as c, a claim template shaped like the controller's
// pinned copies (labelled with the template it copies when from is set).
func createPinned(c kubernetes.Interface, ns, name, from string) func(context.Context) error {
	return func(ctx context.Context) error {
		tmpl := &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: framework.DeviceClaim(ns, name, 1).Spec},
		}
		if from != "" {
			tmpl.Labels = map[string]string{gpuv1.PinnedFromLabel: from}
			tmpl.Annotations = map[string]string{gpuv1.ReservationAnnotation: "night"}
		}
		_, err := c.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, dryRun)
		return err
	}
}
