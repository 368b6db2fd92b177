#!/usr/bin/env bash
# Prints the module's packages that make test runs under the race detector
# (race) or without it (plain).
#
# plain: every package whose tests start a kube-apiserver in-process (its
# test server is in the package's dependencies, test files included), and
# hack/release (it gzips images and has no concurrency of its own). The
# race detector slows kube-apiserver several times over, and building
# Kubernetes' API server with -race would compile about 900 packages a
# second time on CI's 2 cores: the binaries, the demo and the plain
# packages need them without it.
# race: all the others — plugins (in the real kube-scheduler too:
# pkg/scheduler's tests), controllers, driver, tools.
#
#   hack/test-packages.sh race|plain
set -euo pipefail
cd "$(dirname "$0")/.."

apiserver=k8s.io/kubernetes/cmd/kube-apiserver/app/testing
module=$(go list -m)

# One line a package and test variant: its path, then its dependencies.
plain=$( { go list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... \
    | grep -E " ${apiserver}( |\$)" | cut -d' ' -f1 | sed 's/\.test$//'
  echo "$module/hack/release"; } | sort -u)

case "${1:-}" in
  plain) echo "$plain" ;;
  race) go list ./... | sort | comm -23 - <(echo "$plain") ;;
  *) echo "usage: $0 race|plain" >&2; exit 2 ;;
esac
