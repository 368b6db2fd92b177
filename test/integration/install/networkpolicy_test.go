package install

import (
	"maps"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestNetworkPolicyOpensOnlyServedPorts: issue #38 point 4. Every pod of
// the install is selected by a policy that denies ingress, and the
// policies together open, for each workload, exactly the ports its
// containers declare: a port added without its policy (blocked) or a
// policy left open for a port nobody serves both fail. No policy limits
// egress (the API server's address differs per cluster).
func TestNetworkPolicyOpensOnlyServedPorts(t *testing.T) {
	check := func(t *testing.T, objs []*unstructured.Unstructured) {
		var policies []networkingv1.NetworkPolicy
		for _, o := range objs {
			if o.GetKind() != "NetworkPolicy" {
				continue
			}
			var np networkingv1.NetworkPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &np); err != nil {
				t.Fatal(err)
			}
			if slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				t.Errorf("NetworkPolicy %s limits egress", np.Name)
			}
			policies = append(policies, np)
		}
		if len(policies) == 0 {
			t.Fatal("the install has no NetworkPolicy")
		}
		workloads := 0
		for _, o := range objs {
			if o.GetKind() != "Deployment" && o.GetKind() != "DaemonSet" {
				continue
			}
			workloads++
			podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			served := map[int32]bool{}
			for _, c := range podSpec(t, o).Containers {
				for _, p := range c.Ports {
					served[p.ContainerPort] = true
				}
			}
			selected, opened := false, map[int32]bool{}
			for _, np := range policies {
				sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
				if err != nil {
					t.Fatal(err)
				}
				if np.Namespace != o.GetNamespace() || !sel.Matches(labels.Set(podLabels)) {
					continue
				}
				selected = true
				for _, rule := range np.Spec.Ingress {
					if len(rule.Ports) == 0 {
						t.Errorf("NetworkPolicy %s opens every port of %s %s", np.Name, o.GetKind(), o.GetName())
					}
					for _, p := range rule.Ports {
						opened[p.Port.IntVal] = true
					}
				}
			}
			if !selected {
				t.Errorf("no NetworkPolicy selects the pods of %s %s", o.GetKind(), o.GetName())
			}
			if got, want := slices.Sorted(maps.Keys(opened)), slices.Sorted(maps.Keys(served)); !slices.Equal(got, want) {
				t.Errorf("%s %s: NetworkPolicies open ports %v, its containers serve %v", o.GetKind(), o.GetName(), got, want)
			}
		}
		if workloads < 3 {
			t.Errorf("found %d workloads, want the scheduler, the schedule controller and the driver", workloads)
		}
	}
	t.Run("kustomize install", func(t *testing.T) { check(t, render(t, "base")) })
	t.Run("chart defaults", func(t *testing.T) { check(t, mustRenderChart(t, loadChart(t), nil)) })
	t.Run("chart with every value set", func(t *testing.T) { check(t, mustRenderChart(t, loadChart(t), allValues(t))) })
}
