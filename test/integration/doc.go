// Package integration holds Rota's tests against a real control plane: an
// in-process etcd and kube-apiserver, the ResourceClaim controller and the
// rota-scheduler profile built from the shipped registry and configuration.
// See the framework subpackage for the harness.
package integration
