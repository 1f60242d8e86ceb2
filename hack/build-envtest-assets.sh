#!/usr/bin/env bash
# Builds the envtest binaries (kube-apiserver, etcd) from the Go module proxy
# into a cache outside the work tree, keyed by version, and prints the folder.
# Skips the build when the binaries are there already.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${CAPI_MONOLITH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-monolith}"
out="${cache}/envtest/${KUBE_VERSION}"

if [[ -x "${out}/kube-apiserver" && -x "${out}/etcd" ]]; then
  echo "${out}"
  exit 0
fi

mkdir -p "${out}"
minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
ldflags="-s -w"
ldflags+=" -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=${minor}"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

cd "${root}/hack/envtest"
echo "Building etcd and kube-apiserver ${KUBE_VERSION} into ${out} (a cold build takes about 8 minutes)" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${out}/etcd.tmp" ./etcd
CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${out}/kube-apiserver.tmp" ./kube-apiserver
mv "${out}/etcd.tmp" "${out}/etcd"
mv "${out}/kube-apiserver.tmp" "${out}/kube-apiserver"
echo "${out}"
