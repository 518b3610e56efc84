"""`make setup` stops with a message naming what is missing (build tools, package registry)."""

import os
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETUP = ROOT / "tools" / "setup.sh"


def _run_setup(tmp_path, env_extra, path):
    env = dict(os.environ, G2G_SETUP_FORCE="1", G2G_VENV=str(tmp_path / "venv"), PATH=path)
    env.update(env_extra)
    return subprocess.run(["bash", str(SETUP)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=240)


def _bin_dir_without(tmp_path, missing):
    """A PATH directory with symlinks to the usual tools except those in ``missing``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "cat", "cut", "sha256sum", "python3", "python3.11", "cmake", "gcc",
                 "g++", "make", "dirname", "mkdir", "tail", "basename", "env"):
        found = shutil.which(tool)
        if found and tool not in missing:
            (bindir / tool).symlink_to(found)
    return str(bindir)


def test_missing_build_tools_are_named(tmp_path):
    res = _run_setup(tmp_path, {}, _bin_dir_without(tmp_path, {"cmake", "gcc"}))
    assert res.returncode != 0
    assert "missing build tools: cmake gcc" in res.stderr, res.stderr
    assert not (tmp_path / "venv").exists(), "nothing may be created before the check"


def test_unreachable_registry_is_named(tmp_path):
    # A registry on a closed loopback port and no local wheel directories: pip must fail and the
    # script must say that the registry is the problem.
    env = {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_NO_CACHE_DIR": "1",
    }
    res = _run_setup(tmp_path, env, os.environ["PATH"])
    assert res.returncode != 0
    assert "Is the package registry (PyPI) reachable" in res.stderr, res.stderr[-2000:]
