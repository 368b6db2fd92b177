// Package schedule tests the DeploySchedule controller against a real
// control plane: kube-apiserver, Rota's scheduler, the ResourceClaim,
// Deployment and ReplicaSet controllers, GPU ResourceSlices, a pod-lifecycle
// simulator and a fake clock that drives the controller and the simulator.
package schedule
