// Package framework runs a real Kubernetes control plane inside a test process:
// embedded etcd, kube-apiserver, the ResourceClaim controller and Rota's
// scheduler built from the same plugin registry and configuration file as
// cmd/scheduler. It also holds small builders for the objects GPU tests need and
// waiting helpers that fail with a description of what was last seen.
package framework
