package waitreason

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/advisor"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// adviceMaxChecks bounds each pod's move search (pkg/advisor); past it the
// advice says it stopped early and offers the plans found so far.
const adviceMaxChecks = 20000

// adviseLater queues the pod for the unblock advice. The advice is never
// computed in a scheduling cycle: PostFilter only queues the pod, and one
// worker computes the advice from the informers' current state, one pod at
// a time, repeated attempts of a pod coalesced into one computation.
func (pl *WaitReason) adviseLater(pod *v1.Pod) {
	pl.advice.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
}

func newAdviceQueue() workqueue.TypedInterface[types.NamespacedName] {
	return workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[types.NamespacedName]{Name: "rota_unblock_advice"})
}

// runAdvice computes advice until ctx ends.
func (pl *WaitReason) runAdvice(ctx context.Context) {
	go func() {
		<-ctx.Done()
		pl.advice.ShutDown()
	}()
	go func() {
		for {
			key, quit := pl.advice.Get()
			if quit {
				return
			}
			if err := pl.adviseOne(ctx, key); err != nil {
				klog.FromContext(ctx).V(3).Info("Could not compute unblock advice", "pod", key, "err", err)
			}
			pl.advice.Done(key)
		}
	}()
}

// adviseOne computes one waiting pod's advice and hands it to the writer.
func (pl *WaitReason) adviseOne(ctx context.Context, key types.NamespacedName) error {
	pod, err := pl.pods.Pods(key.Namespace).Get(key.Name)
	if err != nil || pod.Spec.NodeName != "" {
		return nil //nolint:nilerr // gone or placed: nothing to advise
	}
	start := pl.clock.Now()
	adv, err := pl.computeAdvice(ctx, pod)
	if err != nil {
		return err
	}
	summary, encoded := "", ""
	if len(adv.Options) > 0 {
		summary = string(adv.Options[0].Kind) + ": " + adv.Options[0].Summary
		b, err := json.Marshal(adv)
		if err != nil {
			return fmt.Errorf("encode advice: %w", err)
		}
		encoded = string(b)
	}
	pl.writer.Advise(pod, summary, encoded)
	klog.FromContext(ctx).V(4).Info("Unblock advice", "pod", klog.KObj(pod), "options", len(adv.Options), "checks", adv.Checks,
		"truncated", adv.Truncated, "took", pl.clock.Since(start).Round(time.Microsecond))
	return nil
}

// computeAdvice builds the advisor's snapshot from the scheduler's
// informers and the shared DRA manager, and runs it for pod.
func (pl *WaitReason) computeAdvice(ctx context.Context, pod *v1.Pod) (advisor.Advice, error) {
	pool, err := gpupool.Snapshot(ctx, pl.dra, &pl.caches.Slices)
	if err != nil {
		return advisor.Advice{}, err
	}
	pods, err := pl.pods.List(labels.Everything())
	if err != nil {
		return advisor.Advice{}, fmt.Errorf("list pods: %w", err)
	}
	pdbs, err := pl.pdbs.List(labels.Everything())
	if err != nil {
		return advisor.Advice{}, fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	snap, unit, err := advisor.Build(ctx, advisor.Objects{
		Pool: pool, Classes: pl.dra.DeviceClasses(), CEL: pl.caches.CEL, Matches: pl.caches.Matches,
		Pods: pods, PDBs: pdbs, Limits: pl.caches.Limits.Get(),
		Claim: func(ns, name string) (*resourceapi.ResourceClaim, error) {
			return pl.dra.ResourceClaims().Get(ns, name)
		},
	}, pod)
	if err != nil {
		return advisor.Advice{}, err
	}
	return advisor.Advise(snap, unit, advisor.Options{MaxChecks: adviceMaxChecks}), nil
}
