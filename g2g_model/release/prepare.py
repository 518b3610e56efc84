"""The official G2G release: what it holds, how it is verified, converted and described.

The release (Hugging Face repository ``feixue22/G2G``, mirrored by the authors on other file
hosts) holds ten G2G-only ``.pth`` files (the table of the G2G README, repository
WeiYuFei0217/G2G) and the MapAnything backbone they were trained on: MapAnything v1.0.1,
DINOv2-large / 1024-dim, a folder ``map-anything-model/`` with ``config.json`` and
``model.safetensors`` (the layout ``MapAnything.from_pretrained`` reads).

:func:`prepare_release` takes a folder that holds those files (downloaded by ``g2g-weights`` or
by hand), converts every ``.pth`` into our checkpoint format (checked against its known W),
loads the backbone strictly (a giant / V1.1 backbone is refused), checks that every checkpoint
fits the backbone, and writes ``manifest.json`` (which file serves which rig and node) and one
ROS parameter file per rig, ``params_<rig>.yaml``, for ``params_file:=``.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional

LOG = logging.getLogger(__name__)

HUB_REPO = "feixue22/G2G"
MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "g2g-weights-manifest"
MANIFEST_VERSION = 1
BACKBONE_FILES = ("config.json", "model.safetensors")
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")


@dataclass(frozen=True)
class ReleasedWeights:
    """One released G2G-only ``.pth``: its task, dataset and W (frames per group)."""

    file: str
    task: str  # "relocalization" or "rig_odometry"
    dataset: str
    frames: int

    @property
    def name(self) -> str:
        return self.file[:-len(".pth")]


# The ten files of the G2G README's table; W from the release's configs/*/*.yaml
# (num_frames_per_group): every Reloc and NCLT rig file W = 5, *-Rig-4 W = 4, HM3D-Rig-8 W = 8.
RELEASED: Dict[str, ReleasedWeights] = {w.file: w for w in (
    ReleasedWeights("HM3D-Reloc.pth", "relocalization", "hm3d", 5),
    ReleasedWeights("TartanGround-Reloc.pth", "relocalization", "tartanground", 5),
    ReleasedWeights("NCLT-Reloc.pth", "relocalization", "nclt", 5),
    ReleasedWeights("ZJH-Reloc.pth", "relocalization", "zjh", 5),
    ReleasedWeights("HM3D-Rig-8.pth", "rig_odometry", "hm3d", 8),
    ReleasedWeights("HM3D-Rig-4.pth", "rig_odometry", "hm3d", 4),
    ReleasedWeights("TartanGround-Rig-4.pth", "rig_odometry", "tartanground", 4),
    ReleasedWeights("NCLT-Rig-Intra.pth", "rig_odometry", "nclt", 5),
    ReleasedWeights("NCLT-Rig-Cross.pth", "rig_odometry", "nclt", 5),
    ReleasedWeights("ZJH-Rig-4.pth", "rig_odometry", "zjh", 4),
)}

# Which released model serves which node of each rig preset (config/<rig>.yaml). map_builder
# must encode maps with the backbone relocalize uses (any checkpoint with that backbone does).
# sim: the 5-camera simulator ring stands in for HM3D-like indoor scenes; of the HM3D rig files
# only HM3D-Rig-8 takes 5 cameras (W = 8 is the most frames per group, not the exact count).
RIG_ASSIGNMENT: Dict[str, Dict[str, str]] = {
    "nclt": {"relocalize": "NCLT-Reloc", "rig_odometry": "NCLT-Rig-Cross"},
    "zjh": {"relocalize": "ZJH-Reloc", "rig_odometry": "ZJH-Rig-4"},
    "sim": {"relocalize": "HM3D-Reloc", "rig_odometry": "HM3D-Rig-8"},
}
# The relocalize node's default window scorer ("combined") includes a token embedding trained
# on the compact backbone's tokens; with the MapAnything backbone the image-only scorer applies.
RELOCALIZE_OVERRIDES = {"window_scorer": "image"}


def find_released_files(root: pathlib.Path) -> Dict[str, pathlib.Path]:
    """``{file name: path}`` of the released ``.pth`` files anywhere under ``root``."""
    found: Dict[str, pathlib.Path] = {}
    for path in sorted(root.rglob("*.pth")):
        if path.name in RELEASED and path.name not in found:
            found[path.name] = path
    return found


def find_backbone_folder(root: pathlib.Path) -> Optional[pathlib.Path]:
    """The folder under ``root`` (itself included) with ``config.json`` and
    ``model.safetensors``; one whose name says map-anything wins over others."""
    candidates = [p.parent for p in sorted(root.rglob(BACKBONE_FILES[1]))
                  if (p.parent / BACKBONE_FILES[0]).is_file()]
    candidates.sort(key=lambda p: ("map-anything" not in str(p).lower(), len(p.parts)))
    return candidates[0] if candidates else None


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def extract_archive(archive: pathlib.Path, into: pathlib.Path) -> None:
    """Unpack a zip or tar archive; members that would land outside ``into`` are refused."""
    import shutil
    import tarfile

    into.mkdir(parents=True, exist_ok=True)
    try:
        if tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tar:
                tar.extractall(into, filter="data")  # no absolute paths, links out, devices
        else:
            shutil.unpack_archive(str(archive), str(into))  # zipfile sanitises member names
    except (OSError, tarfile.TarError, shutil.ReadError, ValueError) as exc:
        raise ValueError(f"cannot unpack {archive} (truncated or not an archive?): {exc}") \
            from exc


def _rel(path: pathlib.Path, base: pathlib.Path) -> str:
    return os.path.relpath(path, base)


def prepare_release(source: pathlib.Path, out: pathlib.Path, source_info: dict,
                    force: bool = False, only: Optional[Iterable[str]] = None) -> dict:
    """Verify and convert a release folder; write checkpoints, manifest and parameter files.

    Args:
        source: folder holding the ``.pth`` files and the backbone (folder or archive).
        out: output folder (``<name>.safetensors``, ``manifest.json``, ``params_<rig>.yaml``).
        source_info: where the files came from (recorded in the manifest).
        force: overwrite existing converted checkpoints.
        only: release names to convert (default: all ten).

    Returns the manifest. Raises ``ValueError`` naming every missing, truncated or wrong file.
    """
    from g2g_model.backbones.mapanything.checkpoint import (
        geometric_input_note,
        load_mapanything_v1,
    )
    from g2g_model.model.checkpoint import convert_official, sha256_of

    source, out = pathlib.Path(source), pathlib.Path(out)
    wanted = [RELEASED[n if n.endswith(".pth") else n + ".pth"] for n in only] if only \
        else list(RELEASED.values())
    found = find_released_files(source)
    missing = [w.file for w in wanted if w.file not in found]
    backbone_dir = find_backbone_folder(source)
    if backbone_dir is None:
        for archive in sorted(p for p in source.rglob("*") if p.is_file() and is_archive(p.name)):
            extract_archive(archive, out / "backbone")
        backbone_dir = find_backbone_folder(out / "backbone") if (out / "backbone").is_dir() \
            else None
    if missing or backbone_dir is None:
        what = [f"G2G weights {missing}"] if missing else []
        if backbone_dir is None:
            what.append("the MapAnything backbone (a folder with config.json and "
                        "model.safetensors, or an archive of it)")
        raise ValueError(f"{source} lacks " + " and ".join(what))

    # The backbone first: a wrong one (giant, truncated, foreign) makes every checkpoint useless.
    try:
        backbone = load_mapanything_v1(backbone_dir)
    except (ValueError, FileNotFoundError) as exc:
        raise ValueError(f"backbone {backbone_dir} refused: {exc}") from exc
    feature_dim = backbone.feature_dim
    backbone_config = backbone.config.to_dict()
    geometry_note = geometric_input_note(backbone.config, str(backbone_dir / "config.json"))
    del backbone
    out.mkdir(parents=True, exist_ok=True)
    problems: List[str] = []
    checkpoints = {}
    for weights in wanted:
        src = found[weights.file]
        dst = out / f"{weights.name}.safetensors"
        try:
            header = _converted_before(dst, src) if not force else None
            if header is None and dst.exists() and not force:
                raise ValueError(f"{dst} exists and was not converted from this file; pass "
                                 "--force to overwrite it")
            if header is None:
                header = convert_official(str(src), str(dst), max_frames=weights.frames)
        except ValueError as exc:
            problems.append(f"{weights.file}: {exc}")
            continue
        if header["config"]["input_dim"] != feature_dim:
            problems.append(f"{weights.file}: takes {header['config']['input_dim']}-dim "
                            f"features, the backbone gives {feature_dim}")
            dst.unlink()
            continue
        checkpoints[weights.name] = {
            "checkpoint": str(dst.resolve()), "source_file": _rel(src, source),
            "source_sha256": header["training"]["source_sha256"], "task": weights.task,
            "dataset": weights.dataset, "max_frames": weights.frames,
        }
    if problems:
        raise ValueError("refused: " + "; ".join(problems))
    manifest = {
        "format": MANIFEST_FORMAT, "format_version": MANIFEST_VERSION, "source": source_info,
        "backbone": {
            "path": str(backbone_dir.resolve()), "name": "mapanything_v1",
            "feature_dim": feature_dim, "config": backbone_config,
            "sha256": {n: sha256_of(str(backbone_dir / n)) for n in BACKBONE_FILES},
            "geometric_input_note": geometry_note,
        },
        "checkpoints": checkpoints,
        "rigs": {}, "params_files": {},
    }
    for rig, nodes in RIG_ASSIGNMENT.items():
        if not all(name in checkpoints for name in nodes.values()):
            continue
        serving = dict(nodes, map_builder=nodes["relocalize"])
        manifest["rigs"][rig] = serving
        params = out / f"params_{rig}.yaml"
        write_params_file(params, rig, {node: checkpoints[name]["checkpoint"]
                                        for node, name in serving.items()},
                          manifest["backbone"]["path"])
        manifest["params_files"][rig] = str(params.resolve())
    write_json_atomically(out / MANIFEST_NAME, manifest)
    return manifest


def _converted_before(dst: pathlib.Path, src: pathlib.Path) -> Optional[dict]:
    """The header of ``dst`` when it is a checkpoint converted from exactly ``src`` (same
    SHA-256): a repeated run reuses it. None otherwise."""
    from g2g_model.model.checkpoint import read_header
    from g2g_model.model.checkpoint import sha256_of

    if not dst.is_file():
        return None
    try:
        header = read_header(dst)
    except ValueError:
        return None
    if (header.get("training") or {}).get("source_sha256") != sha256_of(str(src)):
        return None
    return header


def write_params_file(path: pathlib.Path, rig: str, checkpoints: Dict[str, str],
                      backbone: str) -> None:
    """A ROS 2 parameter file (``params_file:=``) that runs the paper's model on ``rig``."""
    import yaml

    data = {}
    for node, checkpoint in checkpoints.items():
        params = {"checkpoint": checkpoint, "backbone_weights": backbone}
        if node == "relocalize":
            params.update(RELOCALIZE_OVERRIDES)
        data[node] = {"ros__parameters": params}
    text = (f"# The paper's released model for rig:={rig}, written by g2g-weights (see "
            f"{MANIFEST_NAME}).\n" + yaml.safe_dump(data, sort_keys=True))
    path.write_text(text)


def write_json_atomically(path: pathlib.Path, data: dict) -> None:
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_manifest(path: pathlib.Path) -> dict:
    """Read a manifest written by :func:`prepare_release` (``ValueError`` if it is not one)."""
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read the weights manifest {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"{path} is not a {MANIFEST_FORMAT}")
    return data
