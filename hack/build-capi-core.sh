#!/usr/bin/env bash
# Builds Cluster API's own core manager (the main package of the pinned
# sigs.k8s.io/cluster-api module) into the cache outside the work tree and
# prints its path. Skips the build when the binary is there already.
set -euo pipefail

CAPI_VERSION="${CAPI_VERSION:-v1.14.2}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${CAPI_MONOLITH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capi-monolith}"
out="${cache}/capi-core/${CAPI_VERSION}/manager"

if [[ -x "${out}" ]]; then
  echo "${out}"
  exit 0
fi

mkdir -p "$(dirname "${out}")"
ldflags="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=${CAPI_VERSION}"
cd "${root}/hack/capi-core"
echo "Building Cluster API core manager ${CAPI_VERSION} into ${out}" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${out}.tmp" sigs.k8s.io/cluster-api/core
mv "${out}.tmp" "${out}"
echo "${out}"
