// Package admission tests Rota's admission answers against a real
// kube-apiserver and Rota's scheduler: explained waits (rota.dev/Waiting),
// per-tenant limits per model, fair queue order and the fragmentation
// scenario (docs/design.md#scenario-fragmentation).
package admission
