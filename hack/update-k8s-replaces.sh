#!/usr/bin/env bash
# Pins k8s.io/kubernetes and every staging module it requires at v0.0.0 to one
# Kubernetes release, so an upgrade is one command:
#
#   hack/update-k8s-replaces.sh v1.37.2
#
# k8s.io/kubernetes's own go.mod requires its staging modules (k8s.io/api,
# k8s.io/client-go, ...) at v0.0.0 and resolves them with local replaces that do
# not apply to importers. An external module therefore needs one replace per
# staging module, pointing at the matching v0.X.Y tag.
set -euo pipefail

version="${1:?usage: $0 vMAJOR.MINOR.PATCH (a k8s.io/kubernetes release)}"
[[ "$version" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "not a Kubernetes release: $version" >&2; exit 2; }
staging="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

cd "$(dirname "$0")/.."
modfile=$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
[ -n "$modfile" ] || { echo "could not download k8s.io/kubernetes@${version}" >&2; exit 1; }

# Staging modules are exactly those required at v0.0.0 in the require block.
mapfile -t mods < <(awk '/^require \(/{r=1;next} r&&/^\)/{r=0} r&&$2=="v0.0.0"{print $1}' "$modfile" | sort -u)
[ "${#mods[@]}" -gt 0 ] || { echo "no staging modules found in $modfile" >&2; exit 1; }

# Drop stale k8s.io replaces first so modules upstream removed do not linger.
for old in $(go mod edit -json | sed -n 's/.*"Path": "\(k8s\.io\/[^"]*\)".*/\1/p' | sort -u); do
  go mod edit -dropreplace="$old" 2>/dev/null || true
done
args=(-require="k8s.io/kubernetes@${version}")
for m in "${mods[@]}"; do
  args+=(-replace="${m}=${m}@${staging}")
done
go mod edit "${args[@]}"
echo "pinned k8s.io/kubernetes ${version} and ${#mods[@]} staging modules at ${staging}" >&2
