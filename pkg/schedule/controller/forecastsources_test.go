package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// TestInformerSchedulesFollowTheStore: the forecast's schedules come from
// the informer's store; a schedule whose generation changed is read again,
// an invalid one is named and left out, a deleted one is gone.
func TestInformerSchedulesFollowTheStore(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	put := func(ds *v1alpha1.DeploySchedule) {
		t.Helper()
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Update(unstructuredOf(obj)); err != nil {
			t.Fatal(err)
		}
	}
	named := func(name, rv string, generation int64, priority int32) *v1alpha1.DeploySchedule {
		ds := weekSchedule()
		ds.Name, ds.UID, ds.ResourceVersion, ds.Generation = name, types.UID("uid-"+name), rv, generation
		ds.Spec.Windows[0].Priority = priority
		return ds
	}
	src := &informerSchedules{store: store, specs: newSpecCache()}
	read := func() ([]*v1alpha1.DeploySchedule, []string) {
		t.Helper()
		valid, invalid, err := src.ValidSchedules(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return valid, invalid
	}
	put(named("b", "1", 1, 10))
	put(named("a", "2", 1, 10))
	broken := named("c", "3", 1, 10)
	broken.Spec.TimeZone = "Mars/Olympus"
	put(broken)
	valid, invalid := read()
	if len(valid) != 2 || valid[0].Name != "a" || valid[1].Name != "b" {
		t.Fatalf("valid = %v, want a and b in name order", names(valid))
	}
	if len(invalid) != 1 || !strings.Contains(invalid[0], "DeploySchedule serving/c: invalid") {
		t.Fatalf("invalid = %q, want c named", invalid)
	}

	// b's spec changes (a new generation); c is deleted.
	put(named("b", "4", 2, 20))
	if err := store.Delete(unstructuredOf(map[string]any{"metadata": map[string]any{"namespace": ns, "name": "c"}})); err != nil {
		t.Fatal(err)
	}
	valid, invalid = read()
	if len(valid) != 2 || valid[1].Spec.Windows[0].Priority != 20 {
		t.Fatalf("after b changed: %v, want b read again (priority 20)", names(valid))
	}
	if len(invalid) != 0 {
		t.Fatalf("invalid = %q after c was deleted, want none", invalid)
	}
}

func names(list []*v1alpha1.DeploySchedule) []string {
	out := make([]string, len(list))
	for i, ds := range list {
		out[i] = ds.Name
	}
	return out
}
