#!/usr/bin/env bash
# Fails when a Go file is not gofmt -s formatted.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${REPO_ROOT}"
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.go')
[[ ${#files[@]} -eq 0 ]] && exit 0
bad=$(gofmt -s -l "${files[@]}")
if [[ -n "${bad}" ]]; then
  echo "These files are not gofmt -s formatted; run make update:" >&2
  echo "${bad}" >&2
  exit 1
fi
