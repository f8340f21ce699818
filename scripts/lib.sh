# Shared by scripts/demo.sh and scripts/test.sh (sourced, not run).

say() { printf '%s\n' "==> $*" >&2; }

# The interpreter to build the virtualenv with: $PYTHON if given, else python3.11 from pyenv
# or PATH. The PyTorch wheel pinned in the torch extra (2.13.0, CPU) exists here for 3.11 only;
# any other Python would make pip fetch a CUDA build of several GB, so it is refused.
pick_python() {
  local root candidate
  if [ -n "${PYTHON:-}" ]; then
    command -v "$PYTHON" || { say "PYTHON=$PYTHON: not found"; return 1; }
    return
  fi
  root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  for candidate in "$root"/versions/3.11.*/bin/python3.11; do
    [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
  command -v python3.11 && return
  say "Python 3.11 is needed (the torch==2.13.0 CPU wheel is built for it) and none was found:"
  say "install it (pyenv install 3.11, apt-get install python3.11) or set PYTHON=/path/to/python3.11"
  return 1
}

python_version() {
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null
}

require_311() {
  local version
  version=$(python_version "$1")
  if [ "$version" != "3.11" ]; then
    say "$1 is Python ${version:-unknown}: the torch extra (torch==2.13.0, CPU) is for Python 3.11 only;"
    say "on ${version:-it} pip would download a CUDA build of several GB. Use PYTHON=python3.11."
    return 1
  fi
}

# Make sure $VENV is a Python 3.11 virtualenv. One left by an earlier run with another Python is
# replaced, saying so: reusing it would fail the same way again, whatever PYTHON says now. A
# folder that is not a virtualenv (no pyvenv.cfg) is never removed; the message says what to do.
ensure_venv() {
  local python version
  if [ -x "$VENV/bin/python" ]; then
    version=$(python_version "$VENV/bin/python")
    [ "$version" = "3.11" ] && return
    python=$(pick_python) || return 1
    require_311 "$python" || return 1
    if [ ! -f "$VENV/pyvenv.cfg" ]; then
      say "$VENV is not a virtualenv made by python -m venv (no pyvenv.cfg) and holds Python ${version:-unknown};"
      say "remove it (rm -r $VENV) or pick another folder with VENV=DIR, then run this again"
      return 1
    fi
    say "$VENV holds Python ${version:-unknown}; replacing it with a Python 3.11 virtualenv ($python)"
    rm -rf "$VENV"
  else
    python=$(pick_python) || return 1
    require_311 "$python" || return 1
  fi
  say "creating the virtualenv $VENV with $python"
  "$python" -m venv "$VENV"
}
