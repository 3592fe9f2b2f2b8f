# Sourced by scripts/demo and scripts/test: make .venv with the given extras installed.
# Usage: ensure_venv "extra1,extra2"
ensure_venv() {
    local extras="$1"
    local stamp=".venv/.installed-${extras//,/-}"
    if [ ! -x .venv/bin/python ]; then
        echo "==> creating .venv"
        python3 -m venv .venv
        .venv/bin/python -m pip install --quiet --upgrade pip
    fi
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "==> installing actrone-pg[$extras] into .venv"
        .venv/bin/python -m pip install --quiet -e ".[$extras]"
        touch "$stamp"
    fi
}
