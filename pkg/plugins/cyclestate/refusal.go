package cyclestate

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/waits"
)

// refusal is a waits.Refusal kept in a cycle's state. It is never changed
// after it is written, so its clone is itself.
type refusal struct{ waits.Refusal }

func (r *refusal) Clone() fwk.StateData { return r }

// refusalKey is where plugin's refusal of the pod on node is kept; node ""
// holds a refusal for every node (PreFilter's). One key per plugin and
// node, because Filter runs on many nodes at once and CycleState's writes
// are safe only key by key. Keys live only in the scheduler's memory, named
// like the framework's own ("PreFilter" + plugin name), not in rota.dev/.
func refusalKey(plugin, node string) fwk.StateKey {
	return fwk.StateKey("Refusal/" + plugin + "/" + node)
}

// Refuse records plugin's refusal of the pod in the cycle's state and
// returns the status the plugin returns: code, with message r.Message
// prefixed by prefix (a code users see, such as "ReservationNotMember: ";
// may be empty). node is the node Filter refused; "" for PreFilter, which
// refuses every node.
func Refuse(cs fwk.CycleState, plugin, node string, code fwk.Code, prefix string, r waits.Refusal) *fwk.Status {
	cs.Write(refusalKey(plugin, node), &refusal{r})
	cs.Write(lastRefusalKey(node), &refusal{r})
	return fwk.NewStatus(code, prefix+r.Message)
}

// lastRefusalKey holds the latest refusal of the pod on node by any
// plugin. The plugins of one node run one after another, so one key per
// node is safe.
func lastRefusalKey(node string) fwk.StateKey {
	return fwk.StateKey("Refusal/last/" + node)
}

// LastRefusal returns the latest refusal any plugin recorded this cycle
// for the pod on node itself (not for every node), and whether there is
// one. After the node was chosen, only Reserve and PreBind refuse it, so
// this is why a placement was undone.
func LastRefusal(cs fwk.CycleState, node string) (waits.Refusal, bool) {
	return readRefusal(cs, lastRefusalKey(node))
}

// RefusalOf returns the refusal plugin recorded this cycle for node, or for
// every node, and whether there is one. A status without a record is not
// an admission answer (a plugin's ordinary rejection of a node).
//
// WaitReason asks once per node of a failed attempt, so it reads at most
// two keys and allocates nothing else.
func RefusalOf(cs fwk.CycleState, plugin, node string) (waits.Refusal, bool) {
	if r, ok := readRefusal(cs, refusalKey(plugin, node)); ok {
		return r, true
	}
	return readRefusal(cs, refusalKey(plugin, ""))
}

func readRefusal(cs fwk.CycleState, key fwk.StateKey) (waits.Refusal, bool) {
	data, err := cs.Read(key)
	if err != nil {
		return waits.Refusal{}, false
	}
	r, ok := data.(*refusal)
	if !ok {
		return waits.Refusal{}, false
	}
	return r.Refusal, true
}
