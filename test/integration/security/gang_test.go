package security

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// gangPods creates a gang of size pods of one GPU each, on the default
// scheduler (routed to Rota), as the tenant's client; the members named in
// nowhere get a node selector no node matches, so they never place.
func gangPods(t *testing.T, client kubernetes.Interface, namespace, gang string, size int, nowhere ...int) {
	t.Helper()
	for i := range size {
		p := framework.WithLabels(gpuPod(namespace, fmt.Sprintf("%s-%d", gang, i), ""), map[string]string{gpuv1.GangLabel: gang})
		p.Annotations = map[string]string{gpuv1.GangSizeAnnotation: strconv.Itoa(size)}
		for _, n := range nowhere {
			if n == i {
				p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "no-such-node"}
			}
		}
		if _, err := client.CoreV1().Pods(namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGangTurnsPerTenant: issue #16 point 7 (gangs). Only one gang at a
// time may hold a partial placement, for up to the wait limit, and a
// tenant sets its gangs' sizes. Team-a creates two gangs whose second
// member fits nowhere, so each holds a GPU for the wait limit and gives it
// back, over and over; team-b's gang, which fits, must still be admitted:
// after a tenant's partial placement times out, another tenant's waiting
// gang goes first.
func TestGangTurnsPerTenant(t *testing.T) {
	e := setup(t)
	l := newLedger(t)
	ctx := context.Background()
	hogs := []string{"hog", "hog2", "hog3", "hog4"}
	e.cp.Create(t, framework.Node("gpu-node"), framework.GPUSlice("gpu-node", framework.GPUs(framework.GPU{Model: "H100", Architecture: "Hopper", MemoryGiB: 80}, 2)...))
	for ns, client := range map[string]kubernetes.Interface{teamA: e.alice, teamB: e.bob} {
		if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, framework.TieredClaimTemplate(ns, "gpu", framework.ModelTier("H100")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.cp.StartClaimController(t)
	waitLimit := 2 * time.Second
	e.cp.StartSchedulerWithPluginArgs(t, map[string]any{"Gang": map[string]any{"waitLimit": waitLimit.String()}})

	for _, g := range hogs {
		gangPods(t, e.alice, teamA, g, 2, 1)
	}
	e.cp.WaitForWaiting(t, teamA, "hog-0", "GangIncomplete", "holding their devices")
	gangPods(t, e.bob, teamB, "train", 2)

	l.hostile(t, "a tenant's never-completing gangs keep another tenant's gang out", func(ctx context.Context) error {
		// Team-a's gangs time out every wait limit; with turns, team-b's
		// gang gets the next one (about one wait limit here). Without
		// turns, team-a's four older gangs take the slot in rotation and
		// team-b's gang is not admitted within this bound (measured: not
		// in 50 s).
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*waitLimit+framework.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
			bound := 0
			for i := range 2 {
				p, err := e.cp.Client.CoreV1().Pods(teamB).Get(ctx, fmt.Sprintf("train-%d", i), metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if p.Spec.NodeName != "" {
					bound++
				}
			}
			return bound == 2, nil
		})
		if err != nil {
			t.Logf("team-b's gang was not admitted: %v", err)
			return nil
		}
		return errors.New("contained: team-b's gang was admitted whole while team-a's gangs kept taking and timing out partial placements")
	}, "contained")
	e.cp.AllocatedDevices(t) // no GPU double-booked
	for _, g := range hogs {
		p := g + "-1"
		got, err := e.cp.Client.CoreV1().Pods(teamA).Get(ctx, p, metav1.GetOptions{})
		if err != nil || got.Spec.NodeName != "" {
			t.Errorf("%s: %v, node %q; a member that fits nowhere was bound", p, err, got.Spec.NodeName)
		}
	}
}
