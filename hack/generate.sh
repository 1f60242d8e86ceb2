#!/usr/bin/env bash
# Runs controller-gen once per module, as Cluster API runs it once per
# provider: deepcopy beside the API types, and the module's own CRDs, RBAC
# (one ClusterRole per module) and webhook configurations under
# manifests/<module>/{crd,rbac,webhook}. Nothing is shared between modules'
# manifests, so that each clusterctl bundle takes exactly its modules' pieces.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
CONTROLLER_GEN="${CONTROLLER_GEN:?set CONTROLLER_GEN to the controller-gen binary (make generate does)}"
MODULES="${MODULES:-infra machinepool ipam runtimeext}"

for m in ${MODULES}; do
  # Deepcopy for every API package of the module.
  if [[ -d "${m}/api" ]]; then
    "${CONTROLLER_GEN}" object:headerFile=hack/boilerplate.go.txt paths="./${m}/api/..."
  fi
  out="manifests/${m}"
  rm -rf "${out}"
  "${CONTROLLER_GEN}" \
    crd rbac:roleName="capi-monolith-${m}-manager" webhook \
    paths="./${m}/..." \
    output:crd:dir="${out}/crd" \
    output:rbac:dir="${out}/rbac" \
    output:webhook:dir="${out}/webhook"
done
