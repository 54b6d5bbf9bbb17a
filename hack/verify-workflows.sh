#!/usr/bin/env bash
# Checks the GitHub Actions workflows (.github/workflows) with actionlint,
# pinned in hack/tools/actionlint: the release workflow runs only when a tag
# is pushed, so a mistake in it would otherwise show at a release.
set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${SCALEPLANE_ROOT}"
hack/install-tools.sh actionlint >/dev/null
mapfile -t workflows < <(git ls-files --cached --others --exclude-standard '.github/workflows/*.yml' '.github/workflows/*.yaml')
[[ "${#workflows[@]}" -gt 0 ]] || scaleplane::fatal "no workflows in .github/workflows"
"${SCALEPLANE_BIN_DIR}/actionlint" -color=false "${workflows[@]}"
