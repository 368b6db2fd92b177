// Package driversharing tests the gpu.rota.dev driver publishing its GPUs
// with consumable memory (--consumable-memory): the real driver on mock NVML
// publishes to a real kube-apiserver, Rota's scheduler allocates several
// time-sliced claims to one GPU, and the test, playing the kubelet, prepares
// and unprepares them over the driver's DRA gRPC API, across a restart.
package driversharing
