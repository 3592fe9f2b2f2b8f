# Sourced by scripts/demo and scripts/test: make .venv with the given extras installed.
# Usage: ensure_venv "extra1,extra2"
# Progress goes to stderr, so that a command's own output (`scripts/demo --json`) stays clean.
ensure_venv() {
    local extras="$1"
    local stamp=".venv/.installed-${extras//,/-}"
    if [ ! -x .venv/bin/python ]; then
        echo "==> creating .venv" >&2
        python3 -m venv .venv >&2
        # The pip a venv comes with (23 or later since Python 3.11.5) installs everything here;
        # upgrading it costs a download and a reinstall on every fresh machine, so only older
        # ones are upgraded.
        if ! .venv/bin/python -c 'import sys, pip; sys.exit(int(pip.__version__.split(".")[0]) < 23)'; then
            .venv/bin/python -m pip install --quiet --upgrade pip >&2
        fi
    fi
    # The dev extra holds every other one: a venv made by scripts/test serves scripts/demo too.
    if [ -f .venv/.installed-dev ] && [ ! pyproject.toml -nt .venv/.installed-dev ]; then
        return 0
    fi
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "==> installing actrone-pg[$extras] into .venv" >&2
        # --no-compile: byte-compiling every installed module (numpy, onnx, sqlalchemy, ...) was
        # about a third of a first install (docs/setup.md, "The first run"); Python compiles
        # the modules a program imports when it first imports them.
        .venv/bin/python -m pip install --quiet --no-compile -e ".[$extras]" >&2
        touch "$stamp"
    fi
}
