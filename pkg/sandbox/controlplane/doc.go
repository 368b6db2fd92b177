// Package controlplane runs etcd and kube-apiserver in-process, with Rota's
// CRDs, the ResourceClaim controller and Rota's scheduler on top. The
// integration tests (test/integration/framework) and rota-sandbox both start
// their clusters here.
package controlplane
