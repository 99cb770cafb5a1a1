#!/usr/bin/env bash
# Builds the Kubernetes control plane the test suite runs (kube-apiserver, kube-controller-manager and
# kube-scheduler) from the Go module proxy, once per version, into a cache outside the repo.
#
# Why a build: no registry this project may use ships these binaries. `go install` refuses them (their
# go.mod carries replace directives), so scripts/kube-control-plane/ is a pinned wrapper module whose
# go.mod requires the release and maps every staging module to its published twin; go.sum pins it all.
# From scratch this takes about 12 minutes and 2.6 GB of memory on a 2-core machine; when the
# binaries are already in the cache it does nothing. etcd is not built here: tests take Debian's
# etcd-server (see .ci/run).
#
# Prints the cache directory on stdout. BERTH_KUBE_DIR overrides where the binaries go;
# BERTH_KUBE_CHECK_ONLY=1 fails instead of building (the test suite under CI, where this ran first).
set -euo pipefail

module_dir="$(cd "$(dirname "$0")/kube-control-plane" && pwd)"
version="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$module_dir/go.mod")"
cache="${BERTH_KUBE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/kube/$version}"
commands=(kube-apiserver kube-controller-manager kube-scheduler)

built=1
for c in "${commands[@]}"; do [[ -x "$cache/$c" ]] || built=0; done
if [[ $built == 1 ]]; then
  echo "$cache"
  exit 0
fi

if [[ -n "${BERTH_KUBE_CHECK_ONLY:-}" ]]; then
  echo "kube-control-plane: ${commands[*]} $version are not built in $cache: run scripts/kube-control-plane.sh" >&2
  exit 1
fi
command -v go >/dev/null || { echo "kube-control-plane: go is not on PATH (needed once to build $version)" >&2; exit 1; }
echo "kube-control-plane: building ${commands[*]} $version into $cache (about 12 minutes from scratch)" >&2

# The version the binaries report: the apiserver derives its API compatibility version from it.
minor="${version#v1.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

# Build beside the cache and rename into place, so an interrupted build never looks finished.
mkdir -p "$(dirname "$cache")"
staging="$(mktemp -d "$(dirname "$cache")/.build-$version.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
started=$SECONDS
(
  cd "$module_dir"
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$staging/" \
    "${commands[@]/#/k8s.io/kubernetes/cmd/}"
)
mkdir -p "$cache"
for c in "${commands[@]}"; do mv -f "$staging/$c" "$cache/$c"; done
echo "kube-control-plane: built in $((SECONDS - started)) s" >&2
echo "$cache"
