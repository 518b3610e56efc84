#!/usr/bin/env bash
# Provision everything the project needs into ./.venv, idempotently:
#   venv -> pinned ROS 2 Kilted wheels + torch (CPU) + Python deps -> CMake-path repair of the
#   wheels -> tf2_msgs (only if missing) -> g2g_msgs -> editable install of this package.
# A stamp file records a hash of every input; when nothing changed the script returns at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# G2G_VENV relocates the venv (the setup tests use a scratch one); G2G_SETUP_FORCE=1 ignores the
# stamp and redoes every step.
VENV="${G2G_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
STAMP="$VENV/.g2g-setup-stamp"
PYTHON="${PYTHON:-python3.11}"

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

inputs_hash() {
    cat requirements/*.txt setup.py setup.cfg package.xml tools/setup.sh tools/fix_wheel_cmake.py \
        g2g_msgs/CMakeLists.txt g2g_msgs/package.xml g2g_msgs/msg/* g2g_msgs/srv/* \
        tools/interfaces/tf2_msgs/msg/* 2>/dev/null | sha256sum | cut -d' ' -f1
}

HASH="$(inputs_hash)"
if [[ "${G2G_SETUP_FORCE:-0}" != 1 && -x "$PY" && -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" ]]; then
    say "up to date (.venv matches requirements and interfaces)"
    exit 0
fi

# --- prerequisites: name what is missing instead of failing half-way ------------------------
missing=()
command -v "$PYTHON" >/dev/null 2>&1 || command -v python3 >/dev/null 2>&1 || missing+=("python3.11")
for tool in cmake gcc g++ make; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
    die "missing build tools: ${missing[*]}. On Debian 12: sudo apt-get install python3 python3-venv cmake gcc g++ make"
fi
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
pyver="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[[ "$pyver" == "3.11" ]] || die "Python 3.11 is required (the ROS 2 Kilted wheels are cp311); found $PYTHON = $pyver. Set PYTHON=/path/to/python3.11"

# --- venv and packages -----------------------------------------------------------------------
if [[ ! -x "$PY" ]]; then
    say "creating .venv with $PYTHON"
    "$PYTHON" -m venv "$VENV" || die "could not create the venv (on Debian: apt-get install python3-venv)"
fi
say "installing pinned packages (ROS 2 Kilted wheels, torch 2.13.0 CPU, Python deps)"
pip_quiet() {
    # The machine-wide pip config lists local wheel folders that may not exist; pip warns about
    # each one on every package. Hide that noise, keep everything else and pip's exit status.
    "$PY" -m pip "$@" 2>&1 | { grep -v "^WARNING: Location 'file://" || true; }
    return "${PIPESTATUS[0]}"
}
if ! pip_quiet install --quiet --disable-pip-version-check --retries 2 --timeout 30 \
        -r requirements/ros.txt -r requirements/python.txt -c requirements/constraints.txt; then
    die "pip could not install the pinned packages (output above). Is the package registry (PyPI) reachable from this machine? Check with: $PY -m pip download --no-deps -d /tmp ros-rclpy==9.1.2"
fi

# --- repair the wheels' CMake exports (see tools/fix_wheel_cmake.py for why) ------------------
"$PY" tools/fix_wheel_cmake.py "$VENV"

# --- interfaces ------------------------------------------------------------------------------
colcon_build() {  # $1 = package source dir
    # --merge-install into the venv itself: the generated Python package and its libraries land
    # next to the ROS wheels, so nothing has to be sourced afterwards.
    AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH" \
        "$VENV/bin/colcon" --log-base build/colcon-log build --merge-install \
        --build-base build/colcon --install-base "$VENV" --base-paths "$1" \
        --event-handlers console_direct+ \
        --cmake-args -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF >build/colcon-"$(basename "$1")".log 2>&1 \
        || { tail -40 build/colcon-"$(basename "$1")".log >&2; die "colcon build of $1 failed (full log: build/colcon-$(basename "$1").log)"; }
}
mkdir -p build
if "$PY" -c "import tf2_msgs.msg" >/dev/null 2>&1; then
    say "tf2_msgs is importable; not building the stand-in"
else
    say "building tf2_msgs (TFMessage) from its standard definition: it is not published as a wheel"
    colcon_build tools/interfaces/tf2_msgs
fi
say "building g2g_msgs into the venv"
colcon_build g2g_msgs
"$PY" -c "import g2g_msgs.msg, g2g_msgs.srv, tf2_msgs.msg" || die "g2g_msgs / tf2_msgs built but do not import"

# --- this package ----------------------------------------------------------------------------
say "installing g2g_ros + g2g_model in editable mode"
pip_quiet install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . \
    || die "editable install of the project failed"

echo "$HASH" >"$STAMP"
say "done: $VENV"
