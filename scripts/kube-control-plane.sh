#!/usr/bin/env bash
# Builds the Kubernetes control plane the test suite runs (etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler) from the Go module proxy, once per version, into a
# cache outside the repo.
#
# Why a build: no registry this project may use ships the Kubernetes binaries, and a fresh machine
# has no etcd. `go install` refuses both (their go.mod files carry replace directives), so
# scripts/kube-control-plane/ and scripts/etcd/ are pinned wrapper modules that require the releases
# (the first maps every Kubernetes staging module to its published twin); their go.sum pin it all.
# From scratch this takes about 15 minutes and 2.6 GB of memory on a 2-core machine (etcd about 2 of
# them); what is already in the cache is not built again.
#
# Prints the cache directory on stdout. BERTH_KUBE_DIR overrides where the binaries go;
# BERTH_KUBE_CHECK_ONLY=1 fails instead of building (the test suite under CI, where this ran first).
set -euo pipefail

module_dir="$(cd "$(dirname "$0")/kube-control-plane" && pwd)"
etcd_dir="$(cd "$(dirname "$0")/etcd" && pwd)"
version="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$module_dir/go.mod")"
etcd_version="$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" { print $3 }' "$etcd_dir/go.mod")"
cache="${BERTH_KUBE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/kube/$version}"
commands=(kube-apiserver kube-controller-manager kube-scheduler)

missing=()
for c in "${commands[@]}"; do [[ -x "$cache/$c" ]] || { missing=("${commands[@]}"); break; }; done
etcd_built="$("$cache/etcd" --version 2>/dev/null | head -n 1 || true)"
[[ $etcd_built == "etcd Version: ${etcd_version#v}" ]] || missing+=(etcd)
if [[ ${#missing[@]} == 0 ]]; then
  echo "$cache"
  exit 0
fi

if [[ -n "${BERTH_KUBE_CHECK_ONLY:-}" ]]; then
  echo "kube-control-plane: ${missing[*]} ($version, etcd $etcd_version) not built in $cache: run scripts/kube-control-plane.sh" >&2
  exit 1
fi
command -v go >/dev/null || { echo "kube-control-plane: go is not on PATH (needed once to build ${missing[*]})" >&2; exit 1; }
echo "kube-control-plane: building ${missing[*]} ($version, etcd $etcd_version) into $cache (about 15 minutes from scratch)" >&2

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
if [[ ${missing[0]} != etcd ]]; then
  (
    cd "$module_dir"
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$staging/" \
      "${commands[@]/#/k8s.io/kubernetes/cmd/}"
  )
fi
if [[ ${missing[-1]} == etcd ]]; then
  (cd "$etcd_dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$staging/etcd" .)
fi
mkdir -p "$cache"
for c in "${missing[@]}"; do mv -f "$staging/$c" "$cache/$c"; done
echo "kube-control-plane: built in $((SECONDS - started)) s" >&2
echo "$cache"
