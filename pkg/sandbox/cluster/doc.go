// Package cluster assembles a Rota sandbox: an in-process control plane
// (pkg/sandbox/controlplane) with Rota's CRDs, DeviceClasses and scheduler
// profile, the ResourceClaim, Deployment and ReplicaSet controllers, Rota's
// schedule and reservation controllers, and per simulated node the real
// gpu.rota.dev kubelet plugin on mock NVML and a simulated kubelet
// (pkg/sim/kubelet) that calls it over gRPC. Everything that waits (the
// kubelets, the schedule controller) follows one clock, which a scenario run
// makes virtual.
package cluster
