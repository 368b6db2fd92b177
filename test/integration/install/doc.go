// Package install tests the install: the kustomize base under manifests/
// and its overlays, and the Helm chart charts/rota. Both render, a real API
// server accepts every object they contain, and the chart's defaults render
// the same objects as the kustomize install.
package install
