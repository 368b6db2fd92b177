// Package tiering tests, against a real kube-apiserver and Rota's scheduler
// with the shipped configuration, how Tiering's placement reaches the pod:
// the rota.dev/tier annotation arrives in the binding write itself. The
// placement tests of the fallback scenario (docs/design.md#scenario-fallback) live in test/integration.
package tiering
