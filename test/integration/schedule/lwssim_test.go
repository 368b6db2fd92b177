package schedule

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/schedule/controller"
)

// Labels the LeaderWorkerSet controller puts on the pods of a set.
const (
	lwsNameLabel   = "leaderworkerset.sigs.k8s.io/name"
	lwsGroupLabel  = "leaderworkerset.sigs.k8s.io/group-index"
	lwsWorkerLabel = "leaderworkerset.sigs.k8s.io/worker-index"
)

// lwsSim plays the LeaderWorkerSet controller, which cannot run here: for
// each set it keeps spec.replicas groups of size pods (leader
// "<set>-<group>", workers "<set>-<group>-<index>"), deletes the pods of
// groups past spec.replicas, and reports in status how many groups exist,
// are up to date, and have every pod Ready.
type lwsSim struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
}

func startLWSSim(t *testing.T, client kubernetes.Interface, dyn dynamic.Interface) {
	s := &lwsSim{client: client, dyn: dyn}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := s.sync(ctx); err != nil && ctx.Err() == nil {
					t.Logf("lws sim: %v", err)
				}
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// lwsSpec is what the simulator reads of a LeaderWorkerSet.
type lwsSpec struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Replicas             *int32 `json:"replicas"`
		LeaderWorkerTemplate struct {
			LeaderTemplate *v1.PodTemplateSpec `json:"leaderTemplate"`
			WorkerTemplate v1.PodTemplateSpec  `json:"workerTemplate"`
			Size           *int32              `json:"size"`
		} `json:"leaderWorkerTemplate"`
	} `json:"spec"`
}

func (s *lwsSim) sync(ctx context.Context) error {
	list, err := s.dyn.Resource(controller.LeaderWorkerSetsResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list LeaderWorkerSets: %w", err)
	}
	for i := range list.Items {
		if err := s.syncSet(ctx, &list.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *lwsSim) syncSet(ctx context.Context, u *unstructured.Unstructured) error {
	var l lwsSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &l); err != nil {
		return fmt.Errorf("decode %s: %w", u.GetName(), err)
	}
	groups, size := int(ptr.Deref(l.Spec.Replicas, 1)), int(ptr.Deref(l.Spec.LeaderWorkerTemplate.Size, 1))
	pods, err := s.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lwsNameLabel + "=" + l.Name})
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", l.Name, err)
	}
	existing := map[string]*v1.Pod{}
	present, ready := map[int]bool{}, map[int]int{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		existing[pod.Name] = pod
		g, _ := strconv.Atoi(pod.Labels[lwsGroupLabel])
		present[g] = true
		if pod.DeletionTimestamp == nil && isReady(pod) {
			ready[g]++
		}
		if g >= groups && pod.DeletionTimestamp == nil {
			if err := s.client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s: %w", pod.Name, err)
			}
		}
	}
	for g := range groups {
		for w := range size {
			name := fmt.Sprintf("%s-%d", l.Name, g)
			tmpl := l.Spec.LeaderWorkerTemplate.LeaderTemplate
			if w > 0 {
				name = fmt.Sprintf("%s-%d-%d", l.Name, g, w)
			}
			if w > 0 || tmpl == nil {
				tmpl = &l.Spec.LeaderWorkerTemplate.WorkerTemplate
			}
			if _, ok := existing[name]; ok {
				continue
			}
			pod := &v1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
			pod.Name, pod.Namespace = name, ns
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			pod.Labels[lwsNameLabel], pod.Labels[lwsGroupLabel], pod.Labels[lwsWorkerLabel] = l.Name, strconv.Itoa(g), strconv.Itoa(w)
			if _, err := s.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %s: %w", name, err)
			}
		}
	}
	readyGroups, updated := int64(0), int64(0)
	for g := range present {
		if g < groups {
			updated++
			if ready[g] == size {
				readyGroups++
			}
		}
	}
	status := map[string]any{"replicas": int64(len(present)), "readyReplicas": readyGroups, "updatedReplicas": updated,
		"observedGeneration": u.GetGeneration(), "hpaPodSelector": lwsNameLabel + "=" + l.Name + "," + lwsWorkerLabel + "=0"}
	if old, _, _ := unstructured.NestedMap(u.Object, "status"); fmt.Sprint(old) == fmt.Sprint(status) {
		return nil
	}
	u = u.DeepCopy()
	u.Object["status"] = status
	if _, err := s.dyn.Resource(controller.LeaderWorkerSetsResource).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("status of %s: %w", l.Name, err)
	}
	return nil
}
