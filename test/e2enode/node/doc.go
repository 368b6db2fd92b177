// Package node runs one real Kubernetes node on this machine for the
// end-to-end tests: containerd and runc (with the CNI bridge plugin for pod
// networking) and the kubelet, each a process built from its Go module,
// all state under one directory, and everything torn down by Stop:
// containers, shims, mounts, network devices and the address pods reach
// kube-apiserver through. Only root can run it.
package node
