package gang

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestTurns: a tenant whose gang gave back a partial placement lets a
// waiting gang of another tenant go first, once; turns alternate between
// tenants that both fail; nobody waits for a gang that is not there.
func TestTurns(t *testing.T) {
	a1 := types.NamespacedName{Namespace: "team-a", Name: "hog"}
	a2 := types.NamespacedName{Namespace: "team-a", Name: "hog2"}
	b1 := types.NamespacedName{Namespace: "team-b", Name: "train"}
	c1 := types.NamespacedName{Namespace: "team-c", Name: "eval"}
	type step struct {
		do      func(*turns)
		ns      string
		waiting []types.NamespacedName
		want    types.NamespacedName // zero: may start
		unfit   types.NamespacedName // a waiting gang the pool cannot hold
	}
	released := func(ns string) func(*turns) { return func(tr *turns) { tr.released(ns) } }
	started := func(ns string) func(*turns) { return func(tr *turns) { tr.started(ns) } }
	steps := []step{
		{ns: "team-a", waiting: []types.NamespacedName{a1, a2, b1}},                                   // nobody yields yet
		{do: released("team-a"), ns: "team-a", waiting: []types.NamespacedName{a1, a2, b1}, want: b1}, // a's hold timed out: b first
		{ns: "team-a", waiting: []types.NamespacedName{a1, a2}},                                       // no other tenant waits: a may go
		{ns: "team-b", waiting: []types.NamespacedName{a1, a2, b1}},                                   // b never yields to a yielding tenant
		{do: started("team-b"), ns: "team-a", waiting: []types.NamespacedName{a1, a2, b1}},            // b took its turn: a is free again
		{do: released("team-b"), ns: "team-b", waiting: []types.NamespacedName{a1, b1}, want: a1},     // b failed too: a first
		{do: released("team-a"), ns: "team-a", waiting: []types.NamespacedName{a1, b1, c1}, want: c1}, // both failed: c, which never failed, first
		{ns: "team-b", waiting: []types.NamespacedName{a1, b1, c1}, want: c1},                         // for b as well
		{do: started("team-c"), ns: "team-a", waiting: []types.NamespacedName{a1, b1, c1}},            // c's turn frees a and b
	}
	tr := newTurns()
	for i, s := range steps {
		if s.do != nil {
			s.do(tr)
		}
		got, ok := tr.goesFirst(s.ns, s.waiting, func(g types.NamespacedName) bool { return g != s.unfit })
		if !ok {
			got = types.NamespacedName{}
		}
		if got != s.want {
			t.Errorf("step %d: a gang of %s lets %v go first, want %v (yielding %v)", i, s.ns, got, s.want, tr.yielding.UnsortedList())
		}
	}
}
