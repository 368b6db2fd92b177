// Package install tests the install manifests: the kustomize base under
// manifests/ and its overlays render, and a real API server accepts every
// object they contain.
package install
