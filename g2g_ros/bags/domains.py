"""The DDS domain an evaluation replay runs on.

A replay's recorder takes every output published on its domain, so two replays on one domain
mix their outputs (2026-11-30: one failed on the other's stamps), and a replay on a robot's
domain would publish the bag's ``/tf`` into the robot's graph. So ``g2g-eval-bag`` runs each
replay's player, nodes and recorder on a private domain (:data:`PRIVATE_DOMAINS`, discovery
limited to this machine) unless ``--domain-id`` names one. A private domain is reserved for
the replay's duration by an advisory lock (``flock``) on a file per domain in the temporary
directory: the operating system releases it when the process ends, however it ends, so a
crashed replay leaves nothing to clean up. The search starts at the domain the process id
picks, so replays started together rarely try the same locks.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple

#: Private domains: within the range DDS's default port mapping allows on Linux (0-101), away
#: from 0 (the usual default).
PRIVATE_DOMAINS = range(10, 100)


def lock_dir() -> Path:
    """Where the domains' lock files live (created on first use)."""
    path = Path(tempfile.gettempdir()) / "g2g-dds-domains"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def private_domain(start: Optional[int] = None) -> Iterator[int]:
    """Reserve a private domain no other replay on this machine holds, for the ``with`` block:
    the first free one of :data:`PRIVATE_DOMAINS` from the one ``start`` (default: the process
    id) picks. Raises ``RuntimeError`` when every one is held."""
    n = len(PRIVATE_DOMAINS)
    first = (os.getpid() if start is None else int(start)) % n
    locks = lock_dir()
    for k in range(n):
        domain = PRIVATE_DOMAINS[(first + k) % n]
        handle = open(locks / f"domain-{domain}.lock", "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by another replay (or by another open file in this process)
            handle.close()
            continue
        try:
            yield domain
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
        return
    raise RuntimeError(f"every private DDS domain ({PRIVATE_DOMAINS.start}-"
                       f"{PRIVATE_DOMAINS.stop - 1}) is held by another replay; pass "
                       "--domain-id N")


@contextmanager
def replay_domain(domain_id: Optional[int] = None) -> Iterator[Tuple[int, Dict[str, str]]]:
    """``(domain, environment overrides)`` of a replay's graph for the ``with`` block:
    ``domain_id`` as given, or a reserved private domain (:func:`private_domain`) with
    discovery limited to this machine."""
    if domain_id is not None:
        yield int(domain_id), {"ROS_DOMAIN_ID": str(int(domain_id))}
        return
    with private_domain() as domain:
        yield domain, {"ROS_DOMAIN_ID": str(domain),
                       "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
