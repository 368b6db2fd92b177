package kubelet

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// prepare calls NodePrepareResources for the pod's claims that the driver
// allocated, as the kubelet does before it starts the containers.
func (k *Kubelet) prepare(ctx context.Context, pod *v1.Pod, st *podState) error {
	if k.o.Preparer == nil || len(st.prepared) > 0 {
		return nil
	}
	var req drapb.NodePrepareResourcesRequest
	var uids []types.UID
	for _, pc := range pod.Spec.ResourceClaims {
		name := claimName(pod, pc)
		if name == "" {
			continue
		}
		claim, err := k.o.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("claim %s/%s of pod %s: %w", pod.Namespace, name, pod.Name, err)
		}
		if claim.Status.Allocation == nil {
			return fmt.Errorf("claim %s/%s of pod %s is not allocated", pod.Namespace, name, pod.Name)
		}
		ours := false
		for _, r := range claim.Status.Allocation.Devices.Results {
			ours = ours || r.Driver == k.o.DriverName
		}
		if !ours {
			continue
		}
		req.Claims = append(req.Claims, &drapb.Claim{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)})
		uids = append(uids, claim.UID)
	}
	if len(req.Claims) == 0 {
		return nil
	}
	resp, err := k.o.Preparer.NodePrepareResources(ctx, &req)
	if err != nil {
		return fmt.Errorf("NodePrepareResources for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var errs []error
	for _, c := range req.Claims {
		r := resp.Claims[c.Uid]
		switch {
		case r == nil:
			errs = append(errs, fmt.Errorf("claim %s/%s: no result from NodePrepareResources", c.Namespace, c.Name))
		case r.Error != "":
			errs = append(errs, fmt.Errorf("claim %s/%s: %s", c.Namespace, c.Name, r.Error))
		}
	}
	// Claims prepared by this call are recorded even when another failed,
	// so that they are unprepared with the pod.
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, uid := range uids {
		if r := resp.Claims[req.Claims[i].Uid]; r == nil || r.Error != "" {
			continue
		}
		pc := k.claims[uid]
		if pc == nil {
			pc = &preparedClaim{namespace: req.Claims[i].Namespace, name: req.Claims[i].Name, pods: map[types.UID]bool{}}
			k.claims[uid] = pc
		}
		if !pc.pods[st.uid] {
			pc.pods[st.uid] = true
			st.prepared = append(st.prepared, uid)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("NodePrepareResources for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// unprepare calls NodeUnprepareResources for the claims of the pod that no
// other pod on this node still uses.
func (k *Kubelet) unprepare(ctx context.Context, st *podState) error {
	if k.o.Preparer == nil || len(st.prepared) == 0 {
		return nil
	}
	var req drapb.NodeUnprepareResourcesRequest
	k.mu.Lock()
	for _, uid := range st.prepared {
		pc := k.claims[uid]
		if pc == nil {
			continue
		}
		others := 0
		for p := range pc.pods {
			if p != st.uid {
				others++
			}
		}
		if others == 0 {
			req.Claims = append(req.Claims, &drapb.Claim{Namespace: pc.namespace, Name: pc.name, Uid: string(uid)})
		}
	}
	k.mu.Unlock()
	if len(req.Claims) > 0 {
		resp, err := k.o.Preparer.NodeUnprepareResources(ctx, &req)
		if err != nil {
			return fmt.Errorf("NodeUnprepareResources: %w", err)
		}
		var errs []error
		for _, c := range req.Claims {
			if r := resp.Claims[c.Uid]; r != nil && r.Error != "" {
				errs = append(errs, fmt.Errorf("claim %s/%s: %s", c.Namespace, c.Name, r.Error))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("NodeUnprepareResources: %w", err)
		}
	}
	k.mu.Lock()
	for _, uid := range st.prepared {
		if pc := k.claims[uid]; pc != nil {
			delete(pc.pods, st.uid)
			if len(pc.pods) == 0 {
				delete(k.claims, uid)
			}
		}
	}
	k.mu.Unlock()
	st.prepared = nil
	return nil
}

// claimName is the name of the ResourceClaim behind one of the pod's claim
// references, "" when there is none (yet, or not needed).
func claimName(pod *v1.Pod, pc v1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == pc.Name && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}
