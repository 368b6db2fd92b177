package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/checkpoint"
	"github.com/rota-dev/rota/pkg/scheduler"
	"github.com/rota-dev/rota/pkg/sim/kubelet"
	"github.com/rota-dev/rota/pkg/waits"
)

// pendingGrace is how long a pod may wait for the scheduler before it must
// carry a reason code: a scheduler failover (lease 4 s) and a retry.
const pendingGrace = 30 * time.Second

// pollOnce checks every continuous invariant once.
func (r *runner) pollOnce(ctx context.Context) {
	r.checkAllocations(ctx)
	for _, n := range r.nodes {
		r.checkNode(ctx, n)
	}
	r.checkBudget(ctx)
	r.checkPending(ctx)
	r.checkBoundaries(time.Now())
}

// claimsLive lists every claim from the API server, for confirming what the
// informer's copy suggests: a violation is recorded only when the API
// server agrees.
func (r *runner) claimsLive(ctx context.Context) ([]resourceapi.ResourceClaim, error) {
	list, err := r.c.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (r *runner) claimsCached() []resourceapi.ResourceClaim {
	list, err := r.c.Watch.Claims.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make([]resourceapi.ResourceClaim, 0, len(list))
	for _, c := range list {
		out = append(out, *c)
	}
	return out
}

// doubleBooked returns, per GPU (pool/device), the claims that hold it
// exclusively beside another claim: a device allocated without a share ID
// belongs to one claim.
func doubleBooked(claims []resourceapi.ResourceClaim) []string {
	type holder struct {
		claim  string
		shared bool
	}
	byDevice := map[string][]holder{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		seen := map[string]bool{}
		for _, res := range c.Status.Allocation.Devices.Results {
			if res.Driver != gpuv1.DriverName {
				continue
			}
			key := res.Pool + "/" + res.Device
			if seen[key] {
				continue
			}
			seen[key] = true
			byDevice[key] = append(byDevice[key], holder{claim: c.Namespace + "/" + c.Name, shared: res.ShareID != nil})
		}
	}
	var out []string
	for dev, hs := range byDevice {
		if len(hs) < 2 {
			continue
		}
		for _, h := range hs {
			if !h.shared {
				var names []string
				for _, o := range hs {
					names = append(names, o.claim)
				}
				slices.Sort(names)
				out = append(out, fmt.Sprintf("GPU %s allocated to %s, not all of them shares", dev, strings.Join(names, ", ")))
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkAllocations: no GPU is allocated to two claims unless each holds a
// share of it.
func (r *runner) checkAllocations(ctx context.Context) {
	r.tally.checked(InvAllocationExclusive, 1)
	if len(doubleBooked(r.claimsCached())) == 0 {
		return
	}
	live, err := r.claimsLive(ctx)
	if err != nil {
		return
	}
	for _, d := range doubleBooked(live) {
		r.tally.violated(InvAllocationExclusive, "%s", d)
	}
}

// checkNode reads one node's checkpoint and checks it against itself, the
// API server and the simulated kubelet.
func (r *runner) checkNode(ctx context.Context, n *node) {
	claims1, gen1, inFlight1 := n.kubelet.Claims()
	cp, err := n.checkpoint()
	if err != nil {
		r.tally.violated(InvPreparedExclusive, "node %s: unreadable checkpoint: %v", n.spec.Name, err)
		return
	}
	_, gen2, _ := n.kubelet.Claims()

	// No GPU of the node is prepared for two claims unless both hold shares.
	r.tally.checked(InvPreparedExclusive, 1)
	type use struct {
		claim  string
		shared bool
	}
	byUUID := map[string][]use{}
	for uid, c := range cp.Claims {
		for _, d := range c.Devices {
			byUUID[d.UUID] = append(byUUID[d.UUID], use{claim: c.Namespace + "/" + c.Name + " (" + uid + ")", shared: d.ShareID != ""})
		}
	}
	for gpu, uses := range byUUID {
		if len(uses) < 2 {
			continue
		}
		for _, u := range uses {
			if !u.shared {
				r.tally.violated(InvPreparedExclusive, "node %s: GPU %s prepared for %d claims, not all of them shares: %v", n.spec.Name, gpu, len(uses), uses)
				break
			}
		}
	}

	// A claim prepared on the node is allocated there, to the devices it
	// was prepared with.
	for uid, c := range cp.Claims {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		r.tally.checked(InvPreparedAllocated, 1)
		if why := r.preparedElsewhere(ctx, n, uid, c, false); why != "" {
			if why = r.preparedElsewhere(ctx, n, uid, c, true); why != "" {
				if still, err := n.checkpoint(); err == nil {
					if _, ok := still.Claims[uid]; ok {
						r.tally.violated(InvPreparedAllocated, "node %s: claim %s/%s (%s) prepared: %s", n.spec.Name, c.Namespace, c.Name, uid, why)
					}
				}
			}
		}
	}

	// The checkpoint and the kubelet agree at a moment when no call
	// between them is under way.
	if inFlight1 > 0 || gen1 != gen2 {
		return
	}
	r.tally.checked(InvCheckpointKubelet, 1)
	if d := disagreement(cp, claims1); d != "" {
		r.tally.violated(InvCheckpointKubelet, "node %s: %s", n.spec.Name, d)
		return
	}
	r.verifiedAfterRestart(n)
}

// disagreement compares a node's checkpoint with its kubelet's record: every
// claim the plugin holds was asked for by the kubelet, and every claim the
// plugin answered as prepared is in the checkpoint, completed.
func disagreement(cp *checkpoint.Checkpoint, claims []kubelet.ClaimRecord) string {
	known := map[types.UID]kubelet.ClaimRecord{}
	for _, c := range claims {
		known[c.UID] = c
	}
	var problems []string
	for uid, c := range cp.Claims {
		if _, ok := known[types.UID(uid)]; !ok {
			problems = append(problems, fmt.Sprintf("checkpoint holds %s/%s (%s, %s) that the kubelet never asked for or has unprepared", c.Namespace, c.Name, uid, c.State))
		}
	}
	for _, k := range claims {
		if !k.Prepared {
			continue
		}
		if c, ok := cp.Claims[string(k.UID)]; !ok || c.State != checkpoint.PrepareCompleted {
			problems = append(problems, fmt.Sprintf("the kubelet holds %s/%s (%s) prepared but the checkpoint does not", k.Namespace, k.Name, k.UID))
		}
	}
	slices.Sort(problems)
	return strings.Join(problems, "; ")
}

// preparedElsewhere says why claim c, prepared on n, should not be: the
// claim is gone, or not allocated to n's devices; "" when it is.
func (r *runner) preparedElsewhere(ctx context.Context, n *node, uid string, c checkpoint.Claim, live bool) string {
	var claim *resourceapi.ResourceClaim
	var err error
	if live {
		claim, err = r.c.Client.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
	} else {
		claim, err = r.c.Watch.Claims.ResourceClaims(c.Namespace).Get(c.Name)
	}
	if apierrors.IsNotFound(err) {
		return "the claim is gone"
	}
	if err != nil {
		return "" // cannot tell now
	}
	if string(claim.UID) != uid {
		return fmt.Sprintf("the claim of that name is another one (%s)", claim.UID)
	}
	if claim.Status.Allocation == nil {
		return "the claim is not allocated"
	}
	allocated := map[string]bool{}
	for _, res := range claim.Status.Allocation.Devices.Results {
		if res.Driver == gpuv1.DriverName {
			allocated[res.Pool+"/"+res.Device] = true
		}
	}
	for _, d := range c.Devices {
		if d.Pool != n.spec.Name || !allocated[d.Pool+"/"+d.Device] {
			return fmt.Sprintf("device %s/%s is not in its allocation %v", d.Pool, d.Device, allocated)
		}
	}
	return ""
}

// checkBudget: the members' memory on each GPU a reservation holds stays
// within the reservation's budget per GPU.
func (r *runner) checkBudget(ctx context.Context) {
	objs, err := r.c.Watch.Reservations.List(labels.Everything())
	if err != nil {
		return
	}
	for _, obj := range objs {
		var res rotav1.GPUReservation
		if err := fromUnstructured(obj, &res); err != nil || res.Status.BudgetMiBPerGPU <= 0 {
			continue
		}
		r.tally.checked(InvReservationBudget, 1)
		if over := overBudget(&res, r.claimsCached()); len(over) == 0 {
			continue
		}
		live, err := r.claimsLive(ctx)
		if err != nil {
			continue
		}
		for _, o := range overBudget(&res, live) {
			r.tally.violated(InvReservationBudget, "reservation %s/%s: %s", res.Namespace, res.Name, o)
		}
	}
}

func overBudget(res *rotav1.GPUReservation, claims []resourceapi.ResourceClaim) []string {
	held := map[string]int64{}
	for _, d := range res.Status.Devices {
		held[d.Pool+"/"+d.Device] = 0
	}
	users := map[string][]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil || c.Labels[gpuv1.ReservationNameLabel] != "" {
			continue // the holder claim keeps the GPU; members spend the budget
		}
		for _, a := range c.Status.Allocation.Devices.Results {
			key := a.Pool + "/" + a.Device
			if _, ok := held[key]; !ok || a.Driver != gpuv1.DriverName {
				continue
			}
			q, ok := a.ConsumedCapacity["memory"]
			if !ok {
				continue
			}
			mib := q.Value() / (1 << 20)
			held[key] += mib
			users[key] = append(users[key], fmt.Sprintf("%s/%s %d MiB", c.Namespace, c.Name, mib))
		}
	}
	var out []string
	for key, used := range held {
		if used > res.Status.BudgetMiBPerGPU {
			out = append(out, fmt.Sprintf("GPU %s: %d MiB of a %d MiB budget (%s)", key, used, res.Status.BudgetMiBPerGPU, strings.Join(users[key], ", ")))
		}
	}
	slices.Sort(out)
	return out
}

// checkPending: a rota-scheduler pod that has waited past pendingGrace
// carries the rota.dev/Waiting condition with a reason code.
func (r *runner) checkPending(ctx context.Context) {
	pods, err := r.c.Watch.Pods.List(labels.Everything())
	if err != nil {
		return
	}
	now := time.Now()
	for _, p := range pods {
		if p.Spec.SchedulerName != scheduler.ProfileName || p.Spec.NodeName != "" || p.DeletionTimestamp != nil ||
			now.Sub(p.CreationTimestamp.Time) < pendingGrace {
			continue
		}
		r.tally.checked(InvPendingHasReason, 1)
		if hasReason(p) {
			continue
		}
		live, err := r.c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || live.UID != p.UID || live.Spec.NodeName != "" || live.DeletionTimestamp != nil || hasReason(live) {
			continue
		}
		r.tally.violated(InvPendingHasReason, "pod %s/%s (created %s) waits without a %s reason", p.Namespace, p.Name,
			p.CreationTimestamp.UTC().Format(time.RFC3339), gpuv1.WaitingCondition)
	}
}

func hasReason(p *v1.Pod) bool {
	c := waits.Current(p)
	return c != nil && c.Status == v1.ConditionTrue && c.Reason != ""
}
