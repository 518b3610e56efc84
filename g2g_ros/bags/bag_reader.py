"""Opening a bag for replay or evaluation, with clear errors.

A bag is a rosbag2 directory (``metadata.yaml`` + storage files); a single ``.mcap`` file inside
one is accepted too (its folder is opened). Missing paths, unreadable or corrupt bags and bags
without the topics a tool needs raise :class:`BagError` naming the path and the problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from rosbags.highlevel import AnyReader

from g2g_ros.bags.typestore import METADATA_TOPIC, bag_typestore


class BagError(ValueError):
    """A bag that cannot be used: the message names the path and the reason."""


def bag_dir(path: str | Path) -> Path:
    """The rosbag2 directory of ``path`` (a directory, or a storage file inside one)."""
    path = Path(path)
    if not path.exists():
        raise BagError(f"bag {path} does not exist")
    if path.is_file():
        if (path.parent / "metadata.yaml").is_file():
            return path.parent
        raise BagError(f"bag {path}: a file without metadata.yaml beside it; pass the rosbag2 "
                       f"directory")
    if not (path / "metadata.yaml").is_file():
        raise BagError(f"bag {path}: no metadata.yaml (not a rosbag2 directory)")
    return path


class BagReader(AnyReader):
    """An :class:`AnyReader` opened by :func:`open_bag`; ``with`` only closes it."""

    def __enter__(self) -> "BagReader":
        return self


def open_bag(path: str | Path) -> BagReader:
    """An open reader (close it, or use it as a context manager)."""
    folder = bag_dir(path)
    reader = BagReader([folder], default_typestore=bag_typestore())
    try:
        reader.open()
    except Exception as exc:  # rosbags raises several types for damaged files
        raise BagError(f"bag {folder} cannot be read (corrupt or unsupported): "
                       f"{type(exc).__name__}: {exc}") from exc
    return reader


def require_topics(reader: AnyReader, topics: Iterable[str], where: str, why: str) -> None:
    """Raise :class:`BagError` listing the ``topics`` that ``reader`` lacks."""
    have = set(reader.topics)
    missing = [t for t in topics if t not in have]
    if missing:
        raise BagError(f"bag {where} lacks topics {missing} needed {why}; it has "
                       f"{sorted(have)}")


def iter_messages(reader: AnyReader, topics: Optional[Iterable[str]] = None,
                  where: str = "") -> Iterator[Tuple[str, str, int, bytes]]:
    """``(topic, msgtype, log time ns, raw CDR)`` in log-time order; damage -> BagError."""
    wanted = None if topics is None else set(topics)
    conns = [c for c in reader.connections if wanted is None or c.topic in wanted]
    if not conns:  # an empty list would mean "all connections" to rosbags
        return
    try:
        for conn, stamp, raw in reader.messages(connections=conns):
            yield conn.topic, conn.msgtype, int(stamp), bytes(raw)
    except BagError:
        raise
    except Exception as exc:
        raise BagError(f"bag {where}: reading failed (corrupt?): {type(exc).__name__}: "
                       f"{exc}") from exc


def read_topic(reader: AnyReader, topic: str, where: str = "") -> List[Tuple[int, object]]:
    """All messages of one topic, deserialized: ``[(log time ns, msg)]``."""
    out = []
    for _, msgtype, stamp, raw in iter_messages(reader, [topic], where):
        try:
            out.append((stamp, reader.deserialize(raw, msgtype)))
        except Exception as exc:
            raise BagError(f"bag {where}: a {topic} message cannot be decoded: {exc}") from exc
    return out


def read_metadata(reader: AnyReader, where: str = "") -> Dict[str, object]:
    """The converter's JSON metadata (``/g2g/metadata``), or ``{}`` when absent."""
    if METADATA_TOPIC not in reader.topics:
        return {}
    msgs = read_topic(reader, METADATA_TOPIC, where)
    try:
        return json.loads(msgs[0][1].data) if msgs else {}
    except ValueError as exc:
        raise BagError(f"bag {where}: {METADATA_TOPIC} is not JSON: {exc}") from exc
