"""One training collection from several: scene folders linked, pair indexes concatenated.

Training reads trajectories through the paths of its pair index (``scene_XXXXX/traj_YY``,
relative to the collection root), so a root that holds symbolic links to the scenes of several
collections, plus the concatenation of their indexes, trains on all of them without copying a
frame. The labelling commands (``overlap``, ``mine``, ``rig-pairs``) run on the source
collections; they do not follow the links.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Dict, List, Sequence


def _link_scenes(out: Path, roots: Sequence[Path]) -> int:
    linked = 0
    for root in roots:
        scenes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not scenes:
            raise ValueError(f"{root}: no scene folder to link")
        for scene in scenes:
            link = out / scene.name
            target = scene.resolve()
            if link.is_symlink() or link.exists():
                if link.resolve() != target:
                    raise ValueError(f"{link} already names {link.resolve()}, not {target}: two "
                                     "collections hold a scene of that name")
                continue
            link.symlink_to(target, target_is_directory=True)
            linked += 1
    return linked


def _merge_csv(parts: List[Path], out: Path) -> int:
    header, rows = None, []
    for part in parts:
        with open(part, newline="") as handle:
            reader = csv.reader(handle)
            head = next(reader, None)
            if header is None:
                header = head
            elif head != header:
                raise ValueError(f"{part}: columns {head} differ from {parts[0]}'s {header}")
            rows.extend(reader)
    with open(out, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return len(rows)


def _merge_json(parts: List[Path], out: Path) -> int:
    items = []
    for part in parts:
        data = json.loads(part.read_text())
        if not isinstance(data, list):
            raise ValueError(f"{part}: a pair index is a JSON list, got {type(data).__name__}")
        items.extend(data)
    out.write_text(json.dumps(items))
    return len(items)


def merge_collections(out: str | Path, roots: Sequence[str | Path],
                      indexes: Sequence[str]) -> Dict:
    """Link every scene of ``roots`` under ``out`` and concatenate each named index.

    Args:
        out: the merged root (created; links already there are kept when they agree).
        roots: source collections (each a folder of scene folders).
        indexes: index file names (``.csv`` or ``.json``) every root must hold.
    """
    out = Path(out)
    roots = [Path(r) for r in roots]
    if len(roots) < 2:
        raise ValueError("merge needs at least two collections")
    for root in roots:
        if not root.is_dir():
            raise ValueError(f"{root} is not a directory")
    for name in indexes:
        if Path(name).suffix not in (".csv", ".json"):
            raise ValueError(f"index {name}: only .csv and .json indexes can be merged")
        missing = [str(r / name) for r in roots if not (r / name).is_file()]
        if missing:
            raise ValueError(f"index {name} is missing in: {', '.join(missing)}")
    out.mkdir(parents=True, exist_ok=True)
    summary: Dict = {"out": str(out), "scenes_linked": _link_scenes(out, roots), "indexes": {}}
    for name in indexes:
        parts = [r / name for r in roots]
        merge = _merge_csv if name.endswith(".csv") else _merge_json
        summary["indexes"][name] = merge(parts, out / name)
    return summary
