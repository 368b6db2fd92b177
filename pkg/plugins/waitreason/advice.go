package waitreason

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rota-dev/rota/pkg/advisor"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/plugins/advisorinput"
	"github.com/rota-dev/rota/pkg/reservation"
)

// adviceMaxChecks bounds each pod's move search (pkg/advisor); past it the
// advice says it stopped early and offers the plans found so far.
const adviceMaxChecks = advisor.DefaultMaxChecks

// releaseHorizon is how far ahead DeploySchedule transitions count as
// releases a waiting pod could wait for.
const releaseHorizon = 7 * 24 * time.Hour

// watchSchedules starts an informer on DeploySchedules (the scheduler's
// role may list them) and the owner listers that map pods to workloads.
// Without a kubeconfig (a unit test's handle) there are no releases.
func (pl *WaitReason) watchSchedules(ctx context.Context, h fwk.Handle) error {
	if h.KubeConfig() == nil {
		return nil
	}
	dyn, err := dynamic.NewForConfig(h.KubeConfig())
	if err != nil {
		return fmt.Errorf("%s: dynamic client: %w", Name, err)
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	pl.schedules = factory.ForResource(rotav1.DeploySchedulesResource).Lister()
	shared := h.SharedInformerFactory()
	pl.owners = &reservation.Owners{
		ReplicaSets:  shared.Apps().V1().ReplicaSets().Lister(),
		Deployments:  shared.Apps().V1().Deployments().Lister(),
		StatefulSets: shared.Apps().V1().StatefulSets().Lister(),
		Jobs:         shared.Batch().V1().Jobs().Lister(),
		Pods:         shared.Core().V1().Pods().Lister(),
	}
	factory.Start(ctx.Done())
	return nil
}

// releases are the coming DeploySchedule stops, from the evaluator.
func (pl *WaitReason) releases(ctx context.Context, pods []*v1.Pod) []advisor.Release {
	if pl.schedules == nil {
		return nil
	}
	objs, err := pl.schedules.List(labels.Everything())
	if err != nil {
		return nil
	}
	var schedules []*rotav1.DeploySchedule
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var ds rotav1.DeploySchedule
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ds); err != nil {
			continue
		}
		schedules = append(schedules, &ds)
	}
	out, skipped := advisor.ScheduleReleases(pl.adviceClock.Now(), releaseHorizon, schedules, pods, func(p *v1.Pod) string {
		w, err := pl.owners.WorkloadOf(p)
		if err != nil || w.Kind == "" {
			return ""
		}
		return w.Kind + "/" + w.Name
	})
	if len(skipped) > 0 {
		klog.FromContext(ctx).V(4).Info("DeploySchedules left out of the unblock advice", "skipped", skipped)
	}
	return out
}

// adviseLater queues the pod for the unblock advice. The advice is never
// computed in a scheduling cycle: PostFilter only queues the pod, and one
// worker computes the advice from the informers' current state, repeated
// attempts of a pod coalesced into one computation.
func (pl *WaitReason) adviseLater(pod *v1.Pod) {
	pl.advice.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
}

func newAdviceQueue() workqueue.TypedInterface[types.NamespacedName] {
	return workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[types.NamespacedName]{Name: "rota_unblock_advice"})
}

// adviceRound is the most pods the worker advises from one snapshot.
const adviceRound = 100

// runAdvice computes advice until ctx ends. Each round takes the pods
// queued at that moment (at most adviceRound), builds the advisor's
// snapshot once and advises them one after another in it.
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
			round := []types.NamespacedName{key}
			for len(round) < adviceRound && pl.advice.Len() > 0 {
				k, quit := pl.advice.Get()
				if quit {
					break
				}
				round = append(round, k)
			}
			if err := pl.adviseRound(ctx, round); err != nil {
				klog.FromContext(ctx).V(3).Info("Could not compute unblock advice", "pods", round, "err", err)
			}
			for _, k := range round {
				pl.advice.Done(k)
			}
		}
	}()
}

// adviseRound computes the advice of the waiting pods among keys from one
// snapshot of the scheduler's informers and the shared DRA manager, and
// hands each to the writer.
func (pl *WaitReason) adviseRound(ctx context.Context, keys []types.NamespacedName) error {
	var waiting []*v1.Pod
	for _, key := range keys {
		pod, err := pl.pods.Pods(key.Namespace).Get(key.Name)
		if err != nil || pod.Spec.NodeName != "" {
			continue // gone or placed: nothing to advise
		}
		waiting = append(waiting, pod)
	}
	if len(waiting) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	start := pl.clock.Now()
	b, err := pl.adviceBuilder(ctx)
	if err != nil {
		return err
	}
	adv := advisor.New(b.Snapshot())
	logger.V(4).Info("Unblock advice snapshot built", "pods", len(waiting), "took", pl.clock.Since(start).Round(time.Microsecond))
	var errs []error
	for _, pod := range waiting {
		if err := pl.adviseOne(ctx, b, adv, pod); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", klog.KObj(pod), err))
		}
	}
	return errors.Join(errs...)
}

// adviseOne computes one waiting pod's advice and hands it to the writer.
func (pl *WaitReason) adviseOne(ctx context.Context, b *advisor.Builder, adv *advisor.Advisor, pod *v1.Pod) error {
	start := pl.clock.Now()
	unit, err := b.Unit(pod)
	if err != nil {
		return err
	}
	a := adv.Advise(unit, advisor.Options{MaxChecks: adviceMaxChecks})
	summary, encoded := "", ""
	if len(a.Options) > 0 {
		summary = string(a.Options[0].Kind) + ": " + a.Options[0].Summary
		raw, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("encode advice: %w", err)
		}
		encoded = string(raw)
	}
	pl.writer.Advise(pod, summary, encoded)
	klog.FromContext(ctx).V(4).Info("Unblock advice", "pod", klog.KObj(pod), "options", len(a.Options), "checks", a.Checks,
		"truncated", a.Truncated, "took", pl.clock.Since(start).Round(time.Microsecond))
	return nil
}

// adviceBuilder builds the advisor's snapshot from the scheduler's
// informers and the shared DRA manager.
func (pl *WaitReason) adviceBuilder(ctx context.Context) (*advisor.Builder, error) {
	o, err := advisorinput.Read(ctx, pl.dra, pl.caches, pl.pods, pl.pdbs)
	if err != nil {
		return nil, err
	}
	o.Limits, o.Releases = pl.caches.Limits.Get(), pl.releases(ctx, o.Pods)
	return advisor.NewBuilder(ctx, o)
}
