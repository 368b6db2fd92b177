package refusalmemo

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

type activations []string

func (a *activations) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for k := range pods {
		*a = append(*a, k)
	}
}

func TestMemo(t *testing.T) {
	var act activations
	m := New(&act)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p"}}
	ctx := context.Background()
	if _, ok := m.Get("p", "n1", "f1"); ok {
		t.Fatal("empty memo returned a refusal")
	}
	m.Add(ctx, pod, "n1", "f1", "over")
	if len(act) != 1 || act[0] != "ns/p" {
		t.Errorf("activated %v, want the refused pod", act)
	}
	if _, ok := m.Get("p", "n2", "f1"); ok {
		t.Error("refusal for n1 returned for n2")
	}
	if msg, ok := m.Get("p", "n1", "f1"); !ok || msg != "over" {
		t.Errorf("same state: %q, %v; want the refusal", msg, ok)
	}
	if _, ok := m.Get("p", "n1", "f2"); ok {
		t.Error("refusal returned in another state")
	}
	if _, ok := m.Get("p", "n1", "f1"); ok {
		t.Error("a refusal seen in another state was kept")
	}
	m.Add(ctx, pod, "n1", "f1", "over")
	m.Forget("p")
	if _, ok := m.Get("p", "n1", "f1"); ok {
		t.Error("forgotten refusal returned")
	}
}
