#!/usr/bin/env bash
# The project's test command: installs malaunch with the framework extras and the two example
# third-party plugins into a virtualenv, then runs the whole pytest suite (unit, CLI,
# supervisor, and real PyTorch / TensorFlow / MindSpore jobs on CPU).
#
#   bash scripts/test.sh                 # everything
#   bash scripts/test.sh -m "not frameworks"   # skip the real framework jobs (fast)
#
# VENV (default .venv) picks the virtualenv; PYTHON (default: Python 3.11, found with pyenv or
# on PATH) the interpreter that creates it. The frameworks need Python 3.11: the torch==2.13.0
# CPU wheel is built for it, and any other Python is refused rather than fetching a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
VENV=${VENV:-.venv}
export PIP_DISABLE_PIP_VERSION_CHECK=1

ensure_venv
# torch is pinned in the extra: never let the resolver pick a newer (CUDA, several GB) build.
say "installing malaunch with the test tools and PyTorch, TensorFlow and MindSpore (CPU) into $VENV (about a minute; more the first time)"
"$VENV/bin/python" -m pip install --progress-bar on ".[dev,torch,tensorflow,mindspore,stacks]"
say "installing the example third-party plugins"
"$VENV/bin/python" -m pip install --progress-bar on ./examples/malaunch-example-plugin \
  ./examples/malaunch-paddle
# The report's browser test drives Debian's chromium (never a browser playwright downloads);
# without one it skips, saying so.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's chromium with apt-get for the report's browser test (tests/e2e/test_report_browser.py; about 100 MB)"
    export DEBIAN_FRONTEND=noninteractive
    # apt's own lines show what it fetches; an out-of-date package list gets one update first.
    apt-get install -y chromium \
      || { say "apt-get install failed; updating the package lists and trying again"
           apt-get update && apt-get install -y chromium; } \
      || say "apt-get could not install chromium: the report's browser test will skip"
  else
    say "no /usr/bin/chromium and no apt-get as root to install it: the report's browser test will skip"
  fi
fi
say "running the tests: pytest $*"
exec "$VENV/bin/python" -m pytest "$@"
