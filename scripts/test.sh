#!/usr/bin/env bash
# The project's test command: installs malaunch with the framework extras and the example
# third-party plugin into a virtualenv, then runs the whole pytest suite (unit, CLI,
# supervisor, and real PyTorch / TensorFlow / MindSpore jobs on CPU).
#
#   bash scripts/test.sh                 # everything
#   bash scripts/test.sh -m "not frameworks"   # skip the real framework jobs (fast)
#
# VENV (default .venv) picks the virtualenv; PYTHON (default python3.11) the interpreter
# that creates it. The frameworks need Python 3.11: the torch==2.13.0 CPU wheel is built for it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3.11}
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
# torch is pinned in the extra: never let the resolver pick a newer (CUDA, several GB) build.
"$VENV/bin/python" -m pip install -q ".[dev,torch,tensorflow,mindspore,stacks]"
"$VENV/bin/python" -m pip install -q ./examples/malaunch-example-plugin
exec "$VENV/bin/python" -m pytest "$@"
