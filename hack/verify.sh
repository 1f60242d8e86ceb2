#!/usr/bin/env bash
# Fails when committed generated files (deepcopy, CRDs, RBAC, webhook
# configurations) differ from freshly generated ones, when go.mod/go.sum of
# any module of the repository are not tidy, or when Go files need gofmt.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

status=0
for mod in . hack/tools hack/envtest hack/capi test/capie2e; do
  (cd "${mod}" && go mod tidy)
done
make --no-print-directory generate >/dev/null

changed="$(git status --porcelain --untracked-files=all -- go.mod go.sum hack manifests '*.go')"
if [[ -n "${changed}" ]]; then
  echo "Generated files or go.mod/go.sum are stale; run 'make generate' and 'go mod tidy', then commit:" >&2
  echo "${changed}" >&2
  git --no-pager diff --stat >&2 || true
  status=1
fi

unformatted="$(gofmt -l $(git ls-files '*.go'))"
if [[ -n "${unformatted}" ]]; then
  echo "Go files need gofmt:" >&2
  echo "${unformatted}" >&2
  status=1
fi
exit "${status}"
