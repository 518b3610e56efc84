#!/usr/bin/env python3
"""Build the real-image relocalization replay set ``data/real_reloc`` (map + query trajectory).

Nothing of the data is in this repository. The tool reads a real image sequence with metric
ground truth, splits it into a mapping part and a query part that revisits the mapped views,
and converts both with ``g2g-data convert-tum`` (``g2g_model.data.convert_tum``) into the
dataset format; ``benchmarks/bench_real_reloc.py`` replays the query through the relocalize
node against a map of the mapping part.

Sources (one of):

* ``--tum-dir DIR``: a TUM RGB-D sequence folder as the benchmark distributes it
  (``rgb.txt``, ``rgb/``, ``groundtruth.txt``; TUM RGB-D is CC BY 4.0, cite Sturm et al.,
  IROS 2012). A sequence that revisits places (``fr1_room``, ``fr2_xyz``,
  ``fr3_long_office_household``) takes ``--split half``: map = first part, query = the rest;
* ``--superglue-repo`` + ``--edgeicp-repo`` (the clones of ``tools/make_real_val.py``): the 17
  frames (1 Hz) of ``fr3_long_office_household`` that ``magicleap/SuperGluePretrainedNetwork``
  carries, with the sequence's ground truth from ``ChanghyeonKim93/edgeICP``. The camera does not
  come back within those 17 s, so the default split there is ``interleave``: even frames make
  the map, odd frames the query (each query view lies between two mapped ones, 1 s apart);
* ``--cubeslam-repo`` (a clone of ``shichaoy/cube_slam``, BSD-3): 58 frames (1.5 Hz, JPEG) of
  ``rgbd_dataset_freiburg3_cabinet`` with their ground truth, already associated one pose per
  frame: the camera circles a plain cabinet on a plain floor once (358 deg, 8.3 m) and ends
  0.3 m from where it began. Little texture: a real scene where verification should mostly
  refuse. Default split ``interleave``;
* ``--trajectory DIR``: a trajectory already in the dataset format, e.g. a clip of
  ``data/real_stereo_kitti`` (``tools/make_real_stereo.py``: KITTI, a car on a road, frames 1.2 m
  apart). ``--map-camera`` / ``--query-camera`` pick its cameras (default: the first for
  both); each part keeps one camera, renamed ``cam0`` (its K, size and ``T_body_cam``). Default
  split ``interleave``: the query drives between the map's keyframes, 2.4 m apart, looking the
  same way. The map covers such a query within about 2 m, not the 0.5 m of a hand-held
  camera: ``--cover-trans-m`` (default 2.0 here) is written into ``sources.json``, where
  ``benchmarks/bench_real_reloc.py`` reads it.

Writes ``<out>/map/``, ``<out>/query/`` (trajectories, provenance in meta.json) and
``<out>/sources.json`` (the sources, the split, and the sha256 of every input file read).

Usage::

    python tools/make_real_reloc.py --tum-dir ~/tum/rgbd_dataset_freiburg3_long_office_household \
        --camera fr3 --split half --max-frames 600 --out data/real_reloc
    python tools/make_real_reloc.py --superglue-repo ~/src/SuperGluePretrainedNetwork \
        --edgeicp-repo ~/src/edgeICP --out data/real_reloc
    python tools/make_real_reloc.py --cubeslam-repo ~/src/cube_slam --out data/real_reloc_cabinet
    python tools/make_real_reloc.py --trajectory data/real_stereo_kitti/kitti06_0000_0050 \
        --out data/real_reloc_kitti06
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_real_val import (  # noqa: E402
    CABINET, DATASET, FRAMES, GROUND_TRUTH, real_sets,
)

from g2g_model.data.convert_tum import convert_tum, source_images  # noqa: E402
from g2g_model.data.format import TrajectoryReader, TrajectoryWriter  # noqa: E402
from g2g_model.data.rig import CameraSpec, Rig  # noqa: E402
from g2g_model.model.checkpoint import sha256_of  # noqa: E402

SPLITS = ("half", "interleave")


def split_frames(count: int, mode: str, map_fraction: float = 0.5
                 ) -> Tuple[List[int], List[int]]:
    """Indices ``(map, query)`` of ``count`` time-ordered frames.

    ``half``: the first ``map_fraction`` of the frames map, the rest query (a sequence that
    comes back to its start); ``interleave``: even frames map, odd frames query."""
    if count < 4:
        raise ValueError(f"need at least 4 frames to split, got {count}")
    if mode == "half":
        if not 0.0 < map_fraction < 1.0:
            raise ValueError(f"map_fraction must be in (0, 1), got {map_fraction}")
        cut = min(max(int(round(count * map_fraction)), 2), count - 2)
        return list(range(cut)), list(range(cut, count))
    if mode == "interleave":
        return list(range(0, count, 2)), list(range(1, count, 2))
    raise ValueError(f"split must be one of {SPLITS}, got {mode!r}")


def write_part(src: Path, stamps: np.ndarray, images: Sequence[Path], idx: Sequence[int],
               dest: Path) -> None:
    """A TUM folder ``dest`` whose ``rgb.txt`` lists the frames ``idx`` of ``src`` (absolute
    paths) and whose ``groundtruth.txt`` is the source's."""
    dest.mkdir(parents=True)
    lines = ["# timestamp filename"]
    lines += [f"{stamps[i] / 1e9:.6f} {Path(images[i]).resolve()}" for i in idx]
    (dest / "rgb.txt").write_text("\n".join(lines) + "\n")
    shutil.copyfile(src / "groundtruth.txt", dest / "groundtruth.txt")


def build(src: Path, out: Path, camera: str, split: str, max_frames: int, stride: int,
          map_fraction: float, meta: Dict[str, object], overwrite: bool) -> Dict[str, object]:
    stamps, images = source_images(src)
    keep = list(range(0, len(images), stride))[:max_frames or None]
    stamps, images = np.asarray(stamps)[keep], [images[i] for i in keep]
    map_idx, query_idx = split_frames(len(images), split, map_fraction)
    files = {str(Path(p).resolve()): sha256_of(str(p)) for p in images}
    files[str((src / "groundtruth.txt").resolve())] = sha256_of(str(src / "groundtruth.txt"))
    summary: Dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for part, idx in (("map", map_idx), ("query", query_idx)):
            staged = Path(tmp) / part
            write_part(src, stamps, images, idx, staged)
            if overwrite and (out / part).exists():
                shutil.rmtree(out / part)
            info = convert_tum(staged, out / part, camera=camera,
                               meta=dict(meta, part=part, split=split), overwrite=overwrite)
            summary[part] = {"frames_listed": len(idx), "converted": info}
    return {"split": split, "stride": stride, "max_frames": max_frames,
            "map_fraction": map_fraction, "frames": len(images), "parts": summary,
            "input_sha256": files}


def build_from_trajectory(reader: TrajectoryReader, out: Path, map_camera: str,
                          query_camera: str, split: str, max_frames: int, stride: int,
                          map_fraction: float, overwrite: bool) -> Dict[str, object]:
    """The map and query parts of a dataset-format trajectory: one camera each, named
    ``cam0``; provenance (the source's meta.json) carried into both parts' meta.json."""
    for cam in (map_camera, query_camera):
        if cam not in reader.rig.names:
            raise ValueError(f"{reader.path}: no camera {cam!r} (it has {reader.rig.names})")
    keep = list(range(0, reader.num_frames, stride))[:max_frames or None]
    map_idx, query_idx = split_frames(len(keep), split, map_fraction)
    provenance = {k: v for k, v in reader.meta.items()
                  if k not in ("format", "version", "num_frames", "cameras", "has_depth",
                               "complete")}
    files = {str(reader.path / "poses.csv"): sha256_of(str(reader.path / "poses.csv"))}
    summary: Dict[str, object] = {}
    for part, idx, cam in (("map", map_idx, map_camera), ("query", query_idx, query_camera)):
        spec = reader.rig[cam]
        rig = Rig([CameraSpec("cam0", spec.K, spec.width, spec.height, spec.T_body_cam)])
        meta = dict(provenance, part=part, split=split, source_camera=cam,
                    derived_from=str(reader.path))
        with TrajectoryWriter(out / part, rig, overwrite=overwrite, meta=meta) as writer:
            for i in (keep[j] for j in idx):
                path = reader.image_path(cam, i)
                files[str(path)] = sha256_of(str(path))
                writer.add_frame(int(reader.timestamps_ns[i]), reader.world_T_body[i],
                                 {"cam0": reader.image(cam, i)})
        summary[part] = {"frames": len(idx), "camera": cam}
    return {"split": split, "stride": stride, "max_frames": max_frames,
            "map_fraction": map_fraction, "frames": len(keep), "parts": summary,
            "input_sha256": files}


def by_repository_path(hashes: Dict[str, str], frame_suffix: str, frames: Tuple[dict, str],
                       ground_truth: Tuple[dict, str]) -> Dict[str, str]:
    """``hashes`` (staged file -> sha256) keyed by the repository paths the files came from
    (the staged copies go away): a file ending in ``frame_suffix`` is a frame of
    ``frames = (source, folder)``, the other the ground truth ``(source, path)``."""
    def where(source: dict, path: str) -> str:
        return f"{source['repo']}@{source['commit'][:12]}:{path}"

    return {where(frames[0], f"{frames[1]}/{Path(k).name}") if Path(k).suffix == frame_suffix
            else where(*ground_truth): v for k, v in hashes.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tum-dir", type=Path, help="a TUM RGB-D sequence folder")
    p.add_argument("--camera", default="fr3", help="TUM calibration preset (fr1, fr2, fr3)")
    p.add_argument("--superglue-repo", type=Path, help="clone / mirror of " + FRAMES["repo"])
    p.add_argument("--edgeicp-repo", type=Path, help="clone / mirror of " + GROUND_TRUTH["repo"])
    p.add_argument("--cubeslam-repo", type=Path, help="clone / mirror of " + CABINET["repo"])
    p.add_argument("--trajectory", type=Path,
                   help="a dataset-format trajectory (e.g. data/real_stereo_kitti/<clip>)")
    p.add_argument("--map-camera", help="with --trajectory (default: its first camera)")
    p.add_argument("--query-camera", help="with --trajectory (default: its first camera)")
    p.add_argument("--cover-trans-m", type=float, default=None,
                   help="how near a map keyframe covers a query frame, for the benchmark "
                   "(default: 2.0 with --trajectory, else the benchmark's 0.5)")
    p.add_argument("--split", choices=SPLITS,
                   help="default: half for --tum-dir, interleave otherwise")
    p.add_argument("--map-fraction", type=float, default=0.5, help="with --split half")
    p.add_argument("--max-frames", type=int, default=600, help="after --stride; 0: all")
    p.add_argument("--stride", type=int, default=1, help="keep every n-th image")
    p.add_argument("--out", type=Path, default=Path("data/real_reloc"))
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    given = [args.tum_dir is not None, args.cubeslam_repo is not None,
             args.superglue_repo is not None or args.edgeicp_repo is not None,
             args.trajectory is not None]
    if sum(given) != 1:
        p.error("give one source: --tum-dir, --cubeslam-repo, --trajectory, or both "
                "--superglue-repo and --edgeicp-repo")
    if args.trajectory is None and (args.map_camera or args.query_camera):
        p.error("--map-camera and --query-camera go with --trajectory")
    if args.cover_trans_m is not None and args.cover_trans_m <= 0:
        p.error("--cover-trans-m must be positive")
    if args.stride < 1:
        p.error("--stride must be >= 1")
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        if args.trajectory is not None:
            reader = TrajectoryReader(args.trajectory)
            first = reader.rig.names[0]
            origin = reader.meta.get("dataset_source") or {}
            name = args.trajectory.name if "kitti_sequence" not in reader.meta else (
                f"KITTI odometry, sequence {reader.meta['kitti_sequence']} frames "
                + "-".join(map(str, reader.meta.get("kitti_frames", []))))
            meta = {"dataset": {"name": name,
                                "license": origin.get("license", "see the source's meta.json")}}
            sources = {"trajectory": origin if "repo" in origin
                       else str(args.trajectory.resolve())}
            result = build_from_trajectory(
                reader, args.out, args.map_camera or first, args.query_camera or first,
                args.split or "interleave", args.max_frames, args.stride, args.map_fraction,
                args.overwrite)
            if args.cover_trans_m is None:
                args.cover_trans_m = 2.0
        elif args.tum_dir is not None:
            if not args.tum_dir.is_dir():
                p.error(f"{args.tum_dir}: not a folder")
            meta = {"dataset": {"name": f"TUM RGB-D benchmark, {args.tum_dir.name}",
                                "citation": DATASET["citation"], "license": "CC BY 4.0"},
                    "source": str(args.tum_dir.resolve())}
            sources = {"tum_dir": str(args.tum_dir.resolve())}
            result = build(args.tum_dir, args.out, args.camera, args.split or "half",
                           args.max_frames, args.stride, args.map_fraction, meta, args.overwrite)
        else:
            real = real_sets()["cabinet" if args.cubeslam_repo is not None else "office"]
            repos = {key: getattr(args, key) for key, _ in real.repos}
            if None in repos.values():
                p.error("--superglue-repo and --edgeicp-repo go together")
            # The cabinet's two inputs come from one repository, named as such.
            sources = ({"frames_and_ground_truth": CABINET} if args.cubeslam_repo is not None
                       else real.origin)
            with tempfile.TemporaryDirectory() as tmp:
                meta = {"dataset": real.dataset, **real.stage(repos, Path(tmp))}
                result = build(Path(tmp), args.out, "fr3", args.split or "interleave",
                               args.max_frames, args.stride, args.map_fraction, meta,
                               args.overwrite)
                result["input_sha256"] = by_repository_path(result["input_sha256"],
                                                            *real.inputs)
    except ValueError as exc:
        print(f"make_real_reloc: error: {exc}", file=sys.stderr)
        return 2
    cover = {} if args.cover_trans_m is None else {"cover_trans_m": args.cover_trans_m}
    (args.out / "sources.json").write_text(json.dumps(
        {"dataset": meta["dataset"], "sources": sources, **cover, **result}, indent=1,
        default=str) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "input_sha256"}, indent=1,
                     default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
