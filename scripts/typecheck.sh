#!/usr/bin/env bash
# mypy --strict over the package as it is imported, and over the tests. core/ is a src layout
# (core/malaunch is the malaunch package) and holds a link to each built-in plugin folder under
# its import name (core/malaunch_torch_ddp -> ../plugins/torch_ddp), so core/ is all mypy needs.
set -euo pipefail
cd "$(dirname "$0")/.."
MYPY=${MYPY:-mypy}
MYPYPATH="$PWD/core" "$MYPY" -p malaunch -p malaunch_mindspore -p malaunch_tensorflow_ps \
  -p malaunch_torch_ddp "$@"
MYPYPATH="$PWD/core" "$MYPY" tests benchmarks "$@"
