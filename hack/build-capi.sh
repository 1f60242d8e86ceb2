#!/usr/bin/env bash
# Builds one binary of the pinned sigs.k8s.io/cluster-api module (hack/capi)
# into the cache outside the work tree, keyed by version, and prints its path.
# Skips the build when the binary is there already.
#
#   hack/build-capi.sh core|kubeadm-bootstrap|kubeadm-control-plane|clusterctl
#
# `go install sigs.k8s.io/cluster-api/cmd/clusterctl@<version>` fails (the
# upstream module has replace directives), so every binary is built from the
# hack/capi module, which requires the module at CAPI_VERSION.
set -euo pipefail

CAPI_VERSION="${CAPI_VERSION:-v1.14.2}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${CAPI_MONOLITH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-monolith}"

# name -> main package, cache folder, file name. The managers keep the file
# name "manager" (the process name tests and ps show); the folders are what
# dev/capimanager looks for.
case "${1:-}" in
  core)                  pkg=core;                 dir=capi-core;                  file=manager ;;
  kubeadm-bootstrap)     pkg=bootstrap/kubeadm;    dir=capi-kubeadm-bootstrap;     file=manager ;;
  kubeadm-control-plane) pkg=controlplane/kubeadm; dir=capi-kubeadm-control-plane; file=manager ;;
  clusterctl)            pkg=cmd/clusterctl;       dir=clusterctl;                 file=clusterctl ;;
  *) echo "usage: $0 core|kubeadm-bootstrap|kubeadm-control-plane|clusterctl" >&2; exit 2 ;;
esac
out="${cache}/${dir}/${CAPI_VERSION}/${file}"

if [[ -x "${out}" ]]; then
  echo "${out}"
  exit 0
fi

# The version the binaries report, as Cluster API's own release build sets
# it (clusterctl compares it with the providers' metadata).
version="${CAPI_VERSION#v}"
major="${version%%.*}"
minor="${version#*.}"
minor="${minor%%.*}"
v=sigs.k8s.io/cluster-api/version
ldflags="-s -w -X ${v}.gitVersion=${CAPI_VERSION} -X ${v}.gitMajor=${major} -X ${v}.gitMinor=${minor} -X ${v}.gitTreeState=clean"

mkdir -p "$(dirname "${out}")"
cd "${root}/hack/capi"
echo "Building Cluster API ${1} ${CAPI_VERSION} into ${out}" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${out}.tmp.$$" "sigs.k8s.io/cluster-api/${pkg}"
mv "${out}.tmp.$$" "${out}"
echo "${out}"
