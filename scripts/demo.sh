#!/usr/bin/env bash
# Install malaunch with PyTorch (CPU) into a virtualenv and run a real two-node DDP job on this
# machine: `malaunch simulate` fabricates each node's Octopus environment and starts one
# launcher per node, exactly as the platform would.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
VENV=${VENV:-.venv}
export PIP_DISABLE_PIP_VERSION_CHECK=1
ensure_venv
VENV=$(cd "$VENV" && pwd)
# pip's own progress, not -q: the first install fetches torch (about 200 MB), which takes a while.
say "installing malaunch and PyTorch (CPU) into $VENV (a few seconds once cached)"
"$VENV/bin/python" -m pip install --progress-bar on ".[torch]"
say "running a 2-node x 2-process PyTorch DDP job with malaunch simulate (logs in ${LOG_DIR:-malaunch-logs/demo})"
# The job's `python` is the virtualenv's, as it would be in an image with malaunch installed.
export PATH="$VENV/bin:$PATH"
exec malaunch simulate --nodes 2 --nproc-per-node 2 --platform octopus --framework torch_ddp \
  --log-dir "${LOG_DIR:-malaunch-logs/demo}" -- python examples/torch_ddp_train.py
