package controller

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// A Service the workload controls itself (the LeaderWorkerSet controller's
// headless Service for a set) is not an alias; the same Service controlled
// by anything else, or by nothing, is.
func TestServesAliasSkipsTheWorkloadsOwnService(t *testing.T) {
	podLabels := map[string]string{lwsNameLabel: "llm"}
	wl := &workload{
		Group: rotav1.LeaderWorkerSetGroup, Kind: lwsKind, Namespace: "serving", Name: "llm", UID: "uid-llm",
		Selector: labels.SelectorFromSet(podLabels), InjectedLabels: podLabels,
		Templates: []podTemplate{{Path: "spec.leaderWorkerTemplate.workerTemplate", Template: &v1.PodTemplateSpec{}, Pods: 2}},
	}
	svc := func(owner *metav1.OwnerReference) *v1.Service {
		s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "llm"}, Spec: v1.ServiceSpec{Selector: podLabels}}
		if owner != nil {
			s.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return s
	}
	ref := func(uid string) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: rotav1.LeaderWorkerSetGroupVersion, Kind: lwsKind, Name: "llm", UID: types.UID(uid), Controller: ptr.To(true)}
	}
	for name, tc := range map[string]struct {
		svc  *v1.Service
		want string
	}{
		"the set's own headless Service":            {svc(ref("uid-llm")), ""},
		"a Service controlled by another set's UID": {svc(ref("uid-old")), "Service llm"},
		"a Service of the user's":                   {svc(nil), "Service llm"},
	} {
		t.Run(name, func(t *testing.T) {
			g := aliasGuard{client: fake.NewClientset(tc.svc)}
			got, err := g.servesAlias(context.Background(), wl)
			if err != nil || got != tc.want {
				t.Errorf("servesAlias = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
