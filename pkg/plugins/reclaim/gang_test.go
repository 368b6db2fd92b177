package reclaim

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// A gang's first member to be tried, before the others exist, gets no
// reclaim: one planned then would free room for that member only.
func TestGangIncomplete(t *testing.T) {
	member := func(name string, deleting bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name,
			Labels: map[string]string{gpuv1.GangLabel: "train"}, Annotations: map[string]string{gpuv1.GangSizeAnnotation: "2"}}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	t0, t1 := member("train-0", false), member("train-1", false)
	if got, want := gangIncomplete(t0, []*v1.Pod{t0}), "gang train has 1 of 2 members: no reclaim or preemption until the rest are created"; got != want {
		t.Errorf("one member: %q, want %q", got, want)
	}
	if got := gangIncomplete(t0, []*v1.Pod{t0, member("train-1", true)}); got == "" {
		t.Error("a terminating member counted")
	}
	if got := gangIncomplete(t0, []*v1.Pod{t0, t1}); got != "" {
		t.Errorf("whole gang: %q", got)
	}
	bad := member("x", false)
	bad.Annotations[gpuv1.GangSizeAnnotation] = "two"
	if got := gangIncomplete(bad, []*v1.Pod{bad}); got != "" {
		t.Errorf("invalid size (the Gang plugin's to report): %q", got)
	}
}
