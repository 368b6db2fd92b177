package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// cachedWorkloads is workloadAccess that reads workloads from shared
// informer caches and writes them through the API (clusterWorkloads):
// a pass over thousands of schedules makes no GET per target. A read may
// be stale; every write carries the resourceVersion of the object read,
// so a write based on a stale read fails with a conflict and the step is
// retried on a fresh read — it never overwrites a change it did not see.
type cachedWorkloads struct {
	clusterWorkloads
	deployments  appslisters.DeploymentLister
	statefulSets appslisters.StatefulSetLister
	// leaderWorkerSets is nil when the LeaderWorkerSet API was not served
	// when the controller started: LeaderWorkerSets are then read from the
	// API (clusterWorkloads), as without caches.
	leaderWorkerSets cache.GenericLister
	// synced report whether the informers above have synced.
	synced []cache.InformerSynced
}

// newCachedWorkloads takes the Deployment and StatefulSet informers from
// factory (and lws, when the API is served); the caller starts them.
func newCachedWorkloads(api clusterWorkloads, factory informers.SharedInformerFactory, lws informers.GenericInformer) *cachedWorkloads {
	d, s := factory.Apps().V1().Deployments(), factory.Apps().V1().StatefulSets()
	c := &cachedWorkloads{clusterWorkloads: api, deployments: d.Lister(), statefulSets: s.Lister(),
		synced: []cache.InformerSynced{d.Informer().HasSynced, s.Informer().HasSynced}}
	if lws != nil {
		c.leaderWorkerSets = lws.Lister()
		c.synced = append(c.synced, lws.Informer().HasSynced)
	}
	return c
}

// get implements workloadAccess. The objects it returns are the cache's:
// update copies before it writes.
func (c *cachedWorkloads) get(ctx context.Context, namespace string, ref v1alpha1.WorkloadReference) (*workload, error) {
	switch {
	case ref.Kind == "Deployment" && ref.APIVersion == "apps/v1":
		d, err := c.deployments.Deployments(namespace).Get(ref.Name)
		if err != nil {
			return nil, fmt.Errorf("get Deployment %s/%s: %w", namespace, ref.Name, err)
		}
		return fromDeployment(d)
	case ref.Kind == "StatefulSet" && ref.APIVersion == "apps/v1":
		s, err := c.statefulSets.StatefulSets(namespace).Get(ref.Name)
		if err != nil {
			return nil, fmt.Errorf("get StatefulSet %s/%s: %w", namespace, ref.Name, err)
		}
		return fromStatefulSet(s)
	case ref.Kind == lwsKind && ref.APIVersion == lwsGroupVersion && c.leaderWorkerSets != nil:
		obj, err := c.leaderWorkerSets.ByNamespace(namespace).Get(ref.Name)
		if apierrors.IsNotFound(err) {
			// The CRD may have been removed since the start: the API
			// read tells that from a missing object.
			return c.getLeaderWorkerSet(ctx, namespace, ref.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("get LeaderWorkerSet %s/%s: %w", namespace, ref.Name, err)
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("get LeaderWorkerSet %s/%s: the informer holds a %T", namespace, ref.Name, obj)
		}
		return fromLeaderWorkerSet(u)
	default:
		return c.clusterWorkloads.get(ctx, namespace, ref)
	}
}
