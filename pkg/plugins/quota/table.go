package quota

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpuquota"
)

// The tenants' terms come from two places: the plugin's args (limits
// without a guarantee, as before GPUQuota existed) and the cluster's
// GPUQuotas, which replace a namespace's args whole. The table is rebuilt
// whenever a GPUQuota changes and swapped in at once: a cycle reads one
// table, and a change needs no scheduler restart.

// argTenants turns the args' limits into terms: nothing guaranteed, the
// limit is what may be borrowed.
func argTenants(args *QuotaArgs) []gpuquota.Tenant {
	out := make([]gpuquota.Tenant, 0, len(args.Tenants))
	for _, t := range args.Tenants {
		tn := gpuquota.Tenant{Namespace: t.Namespace, OverLimit: rotav1.OverLimitPolicy(t.OverLimit), Models: map[string]gpuquota.Terms{}, Source: "the Quota plugin's args"}
		for m, n := range t.Limits {
			tn.Models[m] = gpuquota.Terms{Guaranteed: 0, Borrowing: int(n), Lending: gpuquota.Unlimited}
		}
		out = append(out, tn)
	}
	return out
}

// tenant returns the namespace's terms from the current table; nil when
// it has none.
func (pl *Quota) tenant(namespace string) *gpuquota.Tenant {
	return pl.live.Table().Tenant(namespace)
}

// tenantOrDefault is tenant, or, while some tenant is guaranteed GPUs, a
// tenant without terms for a namespace that has none: its pods are then
// checked too, because what they take may be borrowed (and is marked);
// nil when the namespace's pods need no check.
func (pl *Quota) tenantOrDefault(namespace string) *gpuquota.Tenant {
	table := pl.live.Table()
	if t := table.Tenant(namespace); t != nil && len(t.Models) > 0 {
		return t
	}
	if table.AnyGuarantees() {
		return &gpuquota.Tenant{Namespace: namespace, OverLimit: rotav1.OverLimitWait, Models: map[string]gpuquota.Terms{}}
	}
	return nil
}

// servesGPUQuotas asks discovery once whether the cluster serves GPUQuotas:
// an informer (the plugin's, or the one kube-scheduler starts for the
// GPUQuota event Quota registers) on a resource that is not served would
// never sync. A handle without a client (the fake-clientset unit test)
// counts as serving them.
func servesGPUQuotas(ctx context.Context, h fwk.Handle) bool {
	if h.ClientSet() == nil {
		return true
	}
	list, err := h.ClientSet().Discovery().ServerResourcesForGroupVersion(rotav1.SchemeGroupVersion.String())
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Discovery of rota.dev failed", "err", err)
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == rotav1.GPUQuotasResource.Resource {
			return true
		}
	}
	return false
}

// watchGPUQuotas starts an informer on GPUQuotas whose every change
// rebuilds the table. The factory is the plugin's own. Until the informer
// has synced, one plain LIST, retried every 200ms, loads the table: a
// reflector whose first lists fail (a CRD established a moment ago) backs
// off for up to half a minute, and PreFilter refuses limited tenants' pods
// until the table is loaded.
func (pl *Quota) watchGPUQuotas(ctx context.Context, dyn dynamic.Interface) error {
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := factory.ForResource(rotav1.GPUQuotasResource).Informer()
	rebuild := func(any) {
		pl.rebuildMu.Lock()
		defer pl.rebuildMu.Unlock()
		pl.rebuild(ctx, inf.GetStore().List())
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    rebuild,
		UpdateFunc: func(_, obj any) { rebuild(obj) },
		DeleteFunc: rebuild,
	}); err != nil {
		return fmt.Errorf("%s: GPUQuota event handler: %w", Name, err)
	}
	pl.quotasSynced = func() bool { return pl.listed.Load() || inf.HasSynced() }
	factory.Start(ctx.Done())
	go func() {
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			if inf.HasSynced() {
				return true, nil
			}
			list, err := dyn.Resource(rotav1.GPUQuotasResource).List(ctx, metav1.ListOptions{})
			if err != nil {
				klog.FromContext(ctx).V(2).Info("Listing GPUQuotas failed; retrying", "err", err)
				return false, nil
			}
			pl.rebuildMu.Lock()
			defer pl.rebuildMu.Unlock()
			if !inf.HasSynced() {
				objs := make([]any, 0, len(list.Items))
				for i := range list.Items {
					objs = append(objs, &list.Items[i])
				}
				pl.rebuild(ctx, objs)
				pl.listed.Store(true)
			}
			return true, nil
		})
	}()
	return nil
}

// quotasLoadWait is how long PreFilter waits for the GPUQuotas to load
// before it gives up on the cycle.
const quotasLoadWait = 2 * time.Second

// waitForQuotas waits up to quotasLoadWait for the GPUQuotas to load, as
// the first cycles after the scheduler starts may come before them.
func (pl *Quota) waitForQuotas(ctx context.Context) bool {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, quotasLoadWait, true, func(context.Context) (bool, error) {
		return pl.quotasSynced(), nil
	})
	return err == nil
}

// rebuild makes the table from the args and the GPUQuotas objs.
// pl.rebuildMu must be held.
func (pl *Quota) rebuild(ctx context.Context, objs []any) {
	logger := klog.FromContext(ctx)
	var quotas []*rotav1.GPUQuota
	for _, obj := range objs {
		q, err := gpuquota.FromObject(obj)
		if err != nil {
			name := "?"
			if u, ok := obj.(*unstructured.Unstructured); ok {
				name = u.GetName()
			}
			logger.Error(err, "Ignoring a GPUQuota that does not decode", "gpuquota", name)
			continue
		}
		quotas = append(quotas, q)
	}
	table, invalid := gpuquota.NewTable(quotas, pl.fromArgs)
	for _, q := range invalid {
		logger.Error(gpuquota.Validate(q).ToAggregate(), "Ignoring an invalid GPUQuota", "gpuquota", klog.KObj(q))
	}
	old := pl.live.Table()
	pl.live.SetTable(table)
	pl.caches.Limits.Set(table.Limits())
	if !old.Equal(table) {
		logger.V(2).Info("Quota terms changed", "tenants", table.Namespaces())
		pl.wakeWaiting(ctx)
	}
}

// wakeWaiting moves every unbound pod with claims back to the active
// queue after the terms changed: a pod Quota refused may fit now, and a
// borrower may be refused now. It is done here, once the new table is in
// place, rather than through a GPUQuota event kube-scheduler watches on
// its own: that event can reach the queue before this plugin's informer
// has rebuilt the table, and the retry would meet the old terms.
func (pl *Quota) wakeWaiting(ctx context.Context) {
	if pl.handle == nil || pl.pods == nil {
		return
	}
	pods, err := pl.pods.List(labels.Everything())
	if err != nil {
		return
	}
	wake := map[string]*v1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil && len(p.Spec.ResourceClaims) > 0 {
			wake[p.Namespace+"/"+p.Name] = p
		}
	}
	if len(wake) > 0 {
		pl.handle.Activate(klog.FromContext(ctx), wake)
	}
}
