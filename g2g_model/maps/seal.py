"""The header checksum of a map: a SHA-256 over the header in canonical JSON.

The tensors of a ``.g2gmap`` carry their own SHA-256 in the header; the header itself (the
keyframe poses and intrinsics) is covered by ``header_sha256``: the SHA-256 of the header
without that key, written as canonical JSON (keys sorted at every level, separators ``,`` and
``:``, ASCII only, numbers as Python's ``json`` writes them). The map writer adds it
(:func:`seal`) and every reader checks it (:func:`check_seal`), so that a changed digit of a
pose is refused as a changed header. A map written before the checksum existed has none: its
readers warn, and ``g2g-map reseal`` adds it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Dict

HEADER_DIGEST_KEY = "header_sha256"


class SealError(ValueError):
    """The header does not match its checksum (changed after the map was written)."""


def canonical_json(value) -> str:
    """``value`` as canonical JSON text (see the module docstring)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def header_digest(header: Dict) -> str:
    """SHA-256 (hex) of ``header`` without :data:`HEADER_DIGEST_KEY`, in canonical JSON."""
    body = {k: v for k, v in header.items() if k != HEADER_DIGEST_KEY}
    return hashlib.sha256(canonical_json(body).encode("ascii")).hexdigest()


def seal(header: Dict) -> Dict:
    """A copy of ``header`` with its checksum, computed over the header as a reader will parse
    it (a JSON round trip: tuples become lists, keys strings)."""
    parsed = json.loads(json.dumps(header))
    parsed[HEADER_DIGEST_KEY] = header_digest(parsed)
    return parsed


def check_seal(header: Dict) -> bool:
    """True when ``header`` carries a checksum and it matches; False when it carries none (a
    map written before header checksums); :class:`SealError` when it does not match."""
    stored = header.get(HEADER_DIGEST_KEY)
    if stored is None:
        return False
    actual = header_digest(header)
    if stored != actual:
        raise SealError(f"header checksum mismatch (stored {str(stored)[:12]}..., computed "
                        f"{actual[:12]}...): the header was changed after the map was written")
    return True
