// Package admission tests Rota's admission answers against a real
// kube-apiserver and Rota's scheduler: explained waits (rota.dev/Waiting),
// per-tenant limits per model, fair queue order and the fragmentation
// scenario of scenario §8.5 (docs/scenarios.md).
package admission
