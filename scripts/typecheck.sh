#!/usr/bin/env bash
# mypy --strict over the package as it is imported, and over the tests. core/ is a src layout
# (core/malaunch is the malaunch package); the built-in plugin folders install under other
# names (plugins/torch_ddp is malaunch_torch_ddp), which mypy cannot map by itself, so a
# throwaway folder of symlinks gives them their import names.
set -euo pipefail
cd "$(dirname "$0")/.."
MYPY=${MYPY:-mypy}
farm=$(mktemp -d)
trap 'rm -rf "$farm"' EXIT
for plugin in plugins/*/; do
  name=$(basename "$plugin")
  ln -s "$PWD/$plugin" "$farm/malaunch_$name"
done
MYPYPATH="$PWD/core:$farm" "$MYPY" -p malaunch -p malaunch_mindspore -p malaunch_tensorflow_ps \
  -p malaunch_torch_ddp "$@"
MYPYPATH="$PWD/core:$farm" "$MYPY" tests benchmarks "$@"
