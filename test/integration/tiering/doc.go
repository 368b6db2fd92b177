// Package tiering tests, against a real kube-apiserver and Rota's scheduler
// with the shipped configuration, how Tiering's placement reaches the pod:
// the rota.dev/tier annotation arrives in the binding write itself. The
// placement tests of scenario §8.4 (docs/scenarios.md) live in test/integration.
package tiering
