package schedule

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// observation is one observed change, ordered by the etcd revision it was written
// at (a single etcd orders every write of every kind).
type observation struct {
	rv   int64
	kind string // pod, claim, deployment
	name string
	// owner: the pod's app label, the claim's pod owner name, the deployment name.
	owner string
	// alive: the pod exists / the claim holds devices. devices: how many.
	alive   bool
	devices int
	// replicas of a deployment.
	replicas int32
}

// observer records pods, claims and deployments of a namespace from watches.
type observer struct {
	mu      sync.Mutex
	records []observation
}

func startObserver(t *testing.T, client kubernetes.Interface, namespace string) *observer {
	o := &observer{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	watchers := []func(context.Context) (watch.Interface, error){
		func(ctx context.Context) (watch.Interface, error) {
			return client.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{})
		},
		func(ctx context.Context) (watch.Interface, error) {
			return client.ResourceV1().ResourceClaims(namespace).Watch(ctx, metav1.ListOptions{})
		},
		func(ctx context.Context) (watch.Interface, error) {
			return client.AppsV1().Deployments(namespace).Watch(ctx, metav1.ListOptions{})
		},
	}
	for _, start := range watchers {
		w, err := start(ctx)
		if err != nil {
			cancel()
			t.Fatalf("observer watch: %v", err)
		}
		wg.Go(func() {
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					o.add(ev)
				}
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return o
}

func (o *observer) add(ev watch.Event) {
	var r observation
	switch obj := ev.Object.(type) {
	case *v1.Pod:
		r = observation{kind: "pod", name: obj.Name, owner: obj.Labels["app"], alive: ev.Type != watch.Deleted}
		r.rv, _ = strconv.ParseInt(obj.ResourceVersion, 10, 64)
	case *resourceapi.ResourceClaim:
		r = observation{kind: "claim", name: obj.Name}
		for _, ref := range obj.OwnerReferences {
			r.owner = ref.Name
		}
		if ev.Type != watch.Deleted && obj.Status.Allocation != nil {
			r.alive, r.devices = true, len(obj.Status.Allocation.Devices.Results)
		}
		r.rv, _ = strconv.ParseInt(obj.ResourceVersion, 10, 64)
	case *appsv1.Deployment:
		r = observation{kind: "deployment", name: obj.Name, owner: obj.Name, alive: ev.Type != watch.Deleted, replicas: ptr.Deref(obj.Spec.Replicas, 1)}
		r.rv, _ = strconv.ParseInt(obj.ResourceVersion, 10, 64)
	default:
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.records = append(o.records, r)
}

// replay walks the records in revision order, calling visit with the state
// just before each record is applied.
type clusterState struct {
	pods     map[string]string // pod -> app
	claims   map[string]int    // claim -> devices held
	claimPod map[string]string // claim -> owner pod
	replicas map[string]int32
}

func (s *clusterState) gpus() int {
	n := 0
	for _, d := range s.claims {
		n += d
	}
	return n
}

// podsOf counts live pods of app and the devices their (or their deleted
// pods') claims still hold.
func (s *clusterState) podsOf(app string) (pods, devices int) {
	for _, a := range s.pods {
		if a == app {
			pods++
		}
	}
	for claim, d := range s.claims {
		if strings.HasPrefix(s.claimPod[claim], app+"-") {
			devices += d
		}
	}
	return pods, devices
}

func (o *observer) replay(visit func(before *clusterState, r observation)) {
	o.mu.Lock()
	records := append([]observation(nil), o.records...)
	o.mu.Unlock()
	sortRecords(records)
	s := &clusterState{pods: map[string]string{}, claims: map[string]int{}, claimPod: map[string]string{}, replicas: map[string]int32{}}
	for _, r := range records {
		visit(s, r)
		switch r.kind {
		case "pod":
			if r.alive {
				s.pods[r.name] = r.owner
			} else {
				delete(s.pods, r.name)
			}
		case "claim":
			s.claimPod[r.name] = r.owner
			if r.alive {
				s.claims[r.name] = r.devices
			} else {
				delete(s.claims, r.name)
			}
		case "deployment":
			s.replicas[r.name] = r.replicas
		}
	}
}

func sortRecords(rs []observation) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].rv < rs[j].rv })
}

func (r observation) String() string {
	return fmt.Sprintf("rv=%d %s %s owner=%s alive=%v devices=%d replicas=%d", r.rv, r.kind, r.name, r.owner, r.alive, r.devices, r.replicas)
}

// deploymentChanges counts observed changes of a Deployment's replicas.
func (o *observer) deploymentChanges() int {
	n := 0
	last := map[string]int32{}
	o.replay(func(_ *clusterState, r observation) {
		if r.kind != "deployment" {
			return
		}
		if prev, ok := last[r.name]; ok && prev != r.replicas {
			n++
		}
		last[r.name] = r.replicas
	})
	return n
}
