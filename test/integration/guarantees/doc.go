// Package guarantees holds the integration tests of GPUQuota guarantees
// (issue #41): the GPUQuota status controller, run as the schedule
// controller's ServiceAccount under the shipped RBAC, against a real
// kube-apiserver.
package guarantees
