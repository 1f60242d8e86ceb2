#!/usr/bin/env bash
# Builds the manager image (hack/image/Dockerfile) with the local Docker
# Engine, pulling nothing: the static binary (CGO_ENABLED=0) and the host's CA
# bundle are copied into a fresh build context on top of FROM scratch.
#
#   IMAGE   the tag to build (default capi-monolith:dev; make image sets
#           capi-monolith:$(VERSION) when VERSION is given)
#   BINARY  a static capi-monolith binary to package (default: built here)
#   CA_BUNDLE  CA certificates to copy (default /etc/ssl/certs/ca-certificates.crt)
set -euo pipefail

IMAGE="${IMAGE:-capi-monolith:dev}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"

[[ -r "${CA_BUNDLE}" ]] || { echo "no CA bundle at ${CA_BUNDLE} (install ca-certificates or set CA_BUNDLE)" >&2; exit 1; }
docker version --format '{{.Server.Version}}' >/dev/null || {
	echo "the Docker Engine is not reachable (DOCKER_HOST=${DOCKER_HOST:-unset})" >&2
	exit 1
}

ctx="$(mktemp -d)"
trap 'rm -rf "${ctx}"' EXIT
if [[ -n "${BINARY:-}" ]]; then
	cp "${BINARY}" "${ctx}/capi-monolith"
else
	(cd "${root}" && CGO_ENABLED=0 go build -trimpath -o "${ctx}/capi-monolith" .)
fi
cp "${CA_BUNDLE}" "${ctx}/ca-certificates.crt"
cp "${here}/Dockerfile" "${ctx}/Dockerfile"
mkdir -m 1777 "${ctx}/tmp"
# The legacy builder: BuildKit and buildx are not needed for FROM scratch.
DOCKER_BUILDKIT=0 docker build --quiet --tag "${IMAGE}" "${ctx}"
echo "built ${IMAGE}"
