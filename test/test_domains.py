"""Each evaluation replay reserves a DDS domain no other replay on the machine holds."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from g2g_ros.bags.domains import PRIVATE_DOMAINS, private_domain, replay_domain


def test_replays_at_once_get_different_domains():
    with private_domain(start=7) as a, private_domain(start=7) as b:
        assert a in PRIVATE_DOMAINS and b in PRIVATE_DOMAINS and a != b
    with private_domain(start=7) as again:        # released at the end of the block
        assert again == a


def test_a_domain_held_by_another_process_is_skipped_until_it_ends():
    with private_domain(start=11) as mine:
        pass
    script = textwrap.dedent("""
        import sys
        from g2g_ros.bags.domains import private_domain
        with private_domain(start=11) as d:
            print(d, flush=True)
            sys.stdin.readline()
        """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    holder = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        held = int(holder.stdout.readline())
        assert held == mine
        with private_domain(start=11) as other:
            assert other != held
    finally:
        holder.kill()                              # killed, not closed: the OS releases it
        holder.wait()
    with private_domain(start=11) as free:
        assert free == held


def test_an_explicit_domain_and_the_private_environment():
    with replay_domain(42) as (domain, env):
        assert (domain, env) == (42, {"ROS_DOMAIN_ID": "42"})
    with replay_domain() as (domain, env):
        assert domain in PRIVATE_DOMAINS
        assert env == {"ROS_DOMAIN_ID": str(domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}


def test_every_domain_held_is_refused_with_what_to_do():
    from contextlib import ExitStack

    held = 0
    with ExitStack() as stack:
        with pytest.raises(RuntimeError, match="--domain-id"):
            for _ in range(len(PRIVATE_DOMAINS) + 1):   # one more than there are
                stack.enter_context(private_domain())
                held += 1
    assert 0 < held <= len(PRIVATE_DOMAINS)
