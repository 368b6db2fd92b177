// Package e2enode runs Rota on a real node: kube-apiserver and the
// controllers a node needs in this process, containerd, runc and the kubelet
// as processes (package node), Rota installed from its Helm chart with the
// images of make images, and only NVML simulated (the driver's dgx-h100
// mock profile). make e2e-node runs it as root; without ROTA_E2E_NODE=1 its
// tests are skipped. docs/e2e-node.md says what is real and what is not.
package e2enode
