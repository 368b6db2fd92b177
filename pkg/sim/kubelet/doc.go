// Package kubelet is a simulated kubelet for one node. It does what a kubelet
// does for Rota's pods, and nothing that needs a container runtime: for every
// pod bound to its node it prepares the pod's DRA claims through the kubelet
// plugin's gRPC API (NodePrepareResources), marks the pod Running and then
// Ready after configurable delays, and for a pod being deleted waits out its
// grace period, unprepares the claims (NodeUnprepareResources) and removes
// the pod. Every delay is measured on an injected clock, so a scenario can
// run on a virtual one.
package kubelet
