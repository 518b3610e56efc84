"""Node processes bound glibc's malloc arenas (g2g_ros.malloc_arenas); the
effect on a node's memory is measured by benchmarks/bench_soak.py (RESULTS_soak.md)."""

import os
import subprocess
import sys

import pytest

PROBE = "from g2g_ros.malloc_arenas import limit_malloc_arenas; print(limit_malloc_arenas())"


def applied(arena_env=None) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if arena_env is not None:
        env["MALLOC_ARENA_MAX"] = arena_env
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, timeout=60, check=True).stdout.strip()
    return out == "True"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc arenas")
def test_limit_applies_unless_the_environment_sets_the_arenas():
    assert applied() is True          # glibc accepted mallopt(M_ARENA_MAX, 2)
    assert applied("4") is False      # the user's MALLOC_ARENA_MAX wins
