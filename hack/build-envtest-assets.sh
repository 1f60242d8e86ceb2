#!/usr/bin/env bash
# Builds the envtest binaries (kube-apiserver, etcd) and the kube-controller-manager
# capi-monolith dev runs from the Go module proxy into a cache outside the work
# tree, keyed by version, and prints the folder. Builds only the binaries that
# are missing, so a cache made before kube-controller-manager was added gains it
# without rebuilding the others.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${CAPI_MONOLITH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-monolith}"
out="${cache}/envtest/${KUBE_VERSION}"
binaries=(etcd kube-apiserver kube-controller-manager)

missing=()
for b in "${binaries[@]}"; do
  [[ -x "${out}/${b}" ]] || missing+=("${b}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
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
# Cold times on 2 shared cores: etcd and kube-apiserver about 11 minutes;
# kube-controller-manager about 4 more once kube-apiserver is built (they share
# most packages), about 10 on its own from an empty build cache.
echo "Building ${missing[*]} ${KUBE_VERSION} into ${out} (a cold build takes 4 to 15 minutes)" >&2
for b in "${missing[@]}"; do
  # Build beside the target and rename, so that an interrupted build never
  # leaves a half-written binary that the check above would take as done.
  CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${out}/${b}.tmp" "./${b}"
  mv "${out}/${b}.tmp" "${out}/${b}"
done
echo "${out}"
