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
//
// The claims are recorded as the pod's before the call, as the kubelet
// records them in its claim-info checkpoint first: a plugin that prepared a
// claim and died before it answered still holds it, and only a kubelet that
// knows the claim unprepares it when the pod goes. Recording a claim only
// after a successful answer left such a claim prepared on the node for good.
func (k *Kubelet) prepare(ctx context.Context, pod *v1.Pod, st *podState) error {
	if k.o.Preparer == nil || st.prepareDone {
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
		st.prepareDone = true
		return nil
	}
	k.mu.Lock()
	for i, uid := range uids {
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
	k.beginCallLocked()
	k.mu.Unlock()
	resp, err := k.o.Preparer.NodePrepareResources(ctx, &req)
	k.endCall()
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
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	for i, uid := range uids {
		if r := resp.Claims[req.Claims[i].Uid]; r != nil && r.Error == "" {
			if pc := k.claims[uid]; pc != nil {
				pc.done = true
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("NodePrepareResources for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	st.prepareDone = true
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
			// No longer prepared as far as the kubelet knows: the plugin
			// may unprepare it and die before it answers.
			pc.done = false
		}
	}
	if len(req.Claims) > 0 {
		k.beginCallLocked()
	}
	k.mu.Unlock()
	if len(req.Claims) > 0 {
		resp, err := k.o.Preparer.NodeUnprepareResources(ctx, &req)
		k.endCall()
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
	k.gen++
	k.mu.Unlock()
	st.prepared, st.prepareDone = nil, false
	return nil
}

// ClaimRecord is a claim the kubelet asked its plugin to prepare for a pod
// on the node and has not unprepared yet.
type ClaimRecord struct {
	UID             types.UID
	Namespace, Name string
	// Prepared: the plugin answered the prepare with success. A claim whose
	// prepare failed or is in flight is recorded too (the kubelet unprepares
	// it with its pod), with Prepared false.
	Prepared bool
}

// Claims returns the claims the kubelet holds for its pods. Generation
// changes whenever a plugin call starts or ends or the claims change, and
// InFlight counts the plugin calls under way: two reads with the same
// generation and no call in flight bracket a moment when the plugin's own
// record of the node's claims must agree with these.
func (k *Kubelet) Claims() (claims []ClaimRecord, generation uint64, inFlight int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for uid, pc := range k.claims {
		claims = append(claims, ClaimRecord{UID: uid, Namespace: pc.namespace, Name: pc.name, Prepared: pc.done})
	}
	return claims, k.gen, k.inFlight
}

func (k *Kubelet) beginCallLocked() {
	k.gen++
	k.inFlight++
}

func (k *Kubelet) endCall() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	k.inFlight--
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
