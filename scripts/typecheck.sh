#!/usr/bin/env bash
# mypy --strict over the package as it is imported. The source folders (core/, plugins/*)
# install under other names (malaunch, malaunch_<framework>), which mypy cannot map by itself,
# so a throwaway folder of symlinks gives it the import names.
set -euo pipefail
cd "$(dirname "$0")/.."
MYPY=${MYPY:-mypy}
farm=$(mktemp -d)
trap 'rm -rf "$farm"' EXIT
ln -s "$PWD/core/malaunch" "$farm/malaunch"
for plugin in plugins/*/; do
  name=$(basename "$plugin")
  ln -s "$PWD/$plugin" "$farm/malaunch_$name"
done
MYPYPATH="$farm" "$MYPY" -p malaunch -p malaunch_mindspore -p malaunch_tensorflow_ps -p malaunch_torch_ddp "$@"
