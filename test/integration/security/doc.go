// Package security tries, as a hostile tenant would, the ways around
// Rota's reservations, budgets and quotas (docs/security.md), against a
// real kube-apiserver that authorizes with RBAC and runs the admission
// policies and RBAC shipped in manifests/. Tenants are users bound to the
// ClusterRole admin in their own namespace. Every hostile attempt is a
// subtest named "attempt: …", and each test logs how many it made and how
// many were denied.
package security
