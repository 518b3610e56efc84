#!/usr/bin/env python3
"""Build the small REAL-image validation set ``data/real_val`` from public git repositories.

Nothing of the data is in this repository: this tool reads the files out of local clones (or
bare mirrors) of the source repositories at pinned commits, converts them into the dataset
format (docs/DATASET_FORMAT.md) and writes the evaluation pair indices. The clones are only
read (``git show <commit>:<path>``).

Sources (docs/TRAINING.md, "Real images (validation set)"):

* frames: ``magicleap/SuperGluePretrainedNetwork`` ``assets/freiburg_sequence/*.png``, 17 colour
  frames (about 1 Hz, the first 17 s) of the TUM RGB-D sequence
  ``rgbd_dataset_freiburg3_long_office_household`` (640 x 480, fr3 camera: no distortion);
* ground truth: ``ChanghyeonKim93/edgeICP`` ``dataset/rgbd_dataset_freiburg3_long_office_household/
  groundtruth.txt``, the benchmark's motion-capture trajectory of the same sequence (100 Hz);
* or, with ``--cubeslam-repo``, a second set: ``shichaoy/cube_slam`` (BSD-3)
  ``object_slam/data/raw_imgs/*.jpg``, 58 frames (1.5 Hz, JPEG) of
  ``rgbd_dataset_freiburg3_cabinet`` (a plain cabinet on a plain floor, circled once), and
  ``object_slam/data/truth_cam_poses.txt``, their ground truth, one pose per frame
  (``<out>/tum_fr3_cabinet/``, default out ``data/real_val_cabinet``).

Usage (clones anywhere; ``--clone-into DIR`` clones from GitHub when the paths are not given)::

    python tools/make_real_val.py --superglue-repo ~/src/SuperGluePretrainedNetwork \
        --edgeicp-repo ~/src/edgeICP --out data/real_val
    python tools/make_real_val.py --cubeslam-repo ~/src/cube_slam     # -> data/real_val_cabinet

Writes ``<out>/tum_fr3_office/`` (trajectory, provenance in meta.json), ``<out>/pairs_w3.json``,
``<out>/pairs_w5.json`` (window pairs, scores from the pose-only overlap proxy of
``g2g_model.data.frustum_pairs``), ``<out>/overlap_proxy.npy`` and ``<out>/sources.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Tuple

import numpy as np

from g2g_model.data.convert_tum import CAMERA_NAME, convert_tum
from g2g_model.data.format import TrajectoryReader, is_complete
from g2g_model.data.frustum_pairs import frustum_overlap_matrix, frustum_window_pairs
from g2g_model.data.mining import write_index

TRAJ_NAME = "tum_fr3_office"
CABINET_TRAJ_NAME = "tum_fr3_cabinet"
FRAMES = {
    "repo": "magicleap/SuperGluePretrainedNetwork",
    "commit": "ddcf11f42e7e0732a0c4607648f9448ea8d73590",
    "path": "assets/freiburg_sequence",
    "license": "repository: Magic Leap academic / non-profit non-commercial research licence "
               "(LICENSE); the frames themselves are TUM RGB-D benchmark data, CC BY 4.0",
}
GROUND_TRUTH = {
    "repo": "ChanghyeonKim93/edgeICP",
    "commit": "207b3b475740d079a4821148b74948d495d90052",
    "path": "dataset/rgbd_dataset_freiburg3_long_office_household/groundtruth.txt",
    "license": "repository: no licence file; the trajectory is TUM RGB-D benchmark data, "
               "CC BY 4.0",
}
DATASET = {
    "name": "TUM RGB-D benchmark, rgbd_dataset_freiburg3_long_office_household",
    "citation": "J. Sturm, N. Engelhard, F. Endres, W. Burgard, D. Cremers: A Benchmark for the "
                "Evaluation of RGB-D SLAM Systems, IROS 2012",
    "license": "CC BY 4.0",
}
CABINET = {
    "repo": "shichaoy/cube_slam",
    "commit": "c371989bf1448802898bc7f17e99bba4a76167e6",
    "frames": "object_slam/data/raw_imgs",
    "ground_truth": "object_slam/data/truth_cam_poses.txt",
    "license": "repository: BSD-3-Clause (LICENSE); the frames and poses are TUM RGB-D "
               "benchmark data, CC BY 4.0",
}
CABINET_DATASET = dict(DATASET, name="TUM RGB-D benchmark, rgbd_dataset_freiburg3_cabinet")
# (window, gaps): B starts `gap` frames after A (no shared frame), both directions.
PAIR_SETS = {3: (3, 4, 5), 5: (5, 6)}
PROXY_DEPTH_M = 2.0


def git_show(repo: Path, commit: str, path: str) -> bytes:
    """The bytes of ``commit:path`` in the clone / mirror ``repo`` (ValueError if absent)."""
    res = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"],
                         capture_output=True)
    if res.returncode != 0:
        raise ValueError(f"{repo}: cannot read {commit[:12]}:{path}: "
                         f"{res.stderr.decode(errors='replace').strip()}")
    return res.stdout


def git_ls(repo: Path, commit: str, folder: str) -> list[str]:
    res = subprocess.run(["git", "-C", str(repo), "ls-tree", "--name-only", commit,
                          folder.rstrip("/") + "/"], capture_output=True, text=True)
    if res.returncode != 0 or not res.stdout.strip():
        raise ValueError(f"{repo}: no folder {folder} at {commit[:12]} ({res.stderr.strip()})")
    return res.stdout.split()


def stage_cabinet(repo: Path, dest: Path) -> list[str]:
    """``dest/rgb.txt``, ``dest/rgb/*.jpg`` and ``dest/groundtruth.txt`` of cube_slam's cabinet
    frames: its pose file has one line per frame (``stamp tx ty tz qx qy qz qw``, the frame's
    index its line's), so each frame takes its pose's stamp. Returns the frame paths used."""
    names = sorted(p for p in git_ls(repo, CABINET["commit"], CABINET["frames"])
                   if p.endswith("_rgb_raw.jpg"))
    poses = git_show(repo, CABINET["commit"], CABINET["ground_truth"])
    rows = [line.split() for line in poses.decode().splitlines()
            if line.strip() and not line.startswith("#")]
    if len(rows) != len(names) or any(len(r) != 8 for r in rows):
        raise ValueError(f"{repo}: {len(names)} frames but {len(rows)} pose lines (8 fields "
                         "each expected)")
    (dest / "rgb").mkdir(parents=True)
    listed = ["# timestamp filename"]
    for name, row in zip(names, rows):
        data = git_show(repo, CABINET["commit"], name)
        if not data.startswith(b"\xff\xd8"):
            raise ValueError(f"{repo}: {name} is not a JPEG (a Git LFS pointer?)")
        (dest / "rgb" / Path(name).name).write_bytes(data)
        listed.append(f"{row[0]} rgb/{Path(name).name}")
    (dest / "rgb.txt").write_text("\n".join(listed) + "\n")
    (dest / "groundtruth.txt").write_bytes(poses)
    return names


def stage(frames_repo: Path, gt_repo: Path, dest: Path) -> list[str]:
    """Write ``dest/rgb/*.png`` and ``dest/groundtruth.txt``; return the frame paths used."""
    (dest / "rgb").mkdir(parents=True)
    names = [p for p in git_ls(frames_repo, FRAMES["commit"], FRAMES["path"])
             if p.endswith(".png")]
    for p in names:
        data = git_show(frames_repo, FRAMES["commit"], p)
        if not data.startswith(b"\x89PNG"):
            raise ValueError(f"{frames_repo}: {p} is not a PNG (a Git LFS pointer?)")
        (dest / "rgb" / Path(p).name).write_bytes(data)
    (dest / "groundtruth.txt").write_bytes(
        git_show(gt_repo, GROUND_TRUTH["commit"], GROUND_TRUTH["path"]))
    return names


def write_window_pairs(out: Path, traj_name: str, camera: str, pair_sets: dict,
                       depth_m: float, min_score: float = 0.0) -> dict:
    """The pose-only overlap proxy of one camera's frames (``overlap_proxy.npy``) and its
    window pairs (``pairs_w{W}.json`` per ``pair_sets`` entry ``W: gaps``); their summary."""
    reader = TrajectoryReader(out / traj_name)
    cam = reader.rig[camera]
    overlap = frustum_overlap_matrix(cam.K, cam.width, cam.height, reader.world_T_cam(camera),
                                     depth_m=depth_m)
    np.save(out / "overlap_proxy.npy", overlap.astype(np.float32))
    summary = {}
    for window, gaps in pair_sets.items():
        pairs = frustum_window_pairs(overlap, traj_name, camera, window, gaps,
                                     min_score=min_score)
        if not pairs:
            raise ValueError(f"no window pair of {window} frames scores >= {min_score}")
        write_index(pairs, out / f"pairs_w{window}.json")
        scores = [p.score for p in pairs]
        summary[f"pairs_w{window}"] = {"pairs": len(pairs), "gaps": list(gaps),
                                       "score_min": min(scores), "score_mean":
                                       round(float(np.mean(scores)), 3),
                                       "score_max": max(scores)}
    return summary


def _clone(repo: str, into: Path) -> Path:
    dest = into / repo.replace("/", "+")
    if not dest.exists():
        subprocess.run(["git", "clone", "--quiet", f"https://github.com/{repo}", str(dest)],
                       check=True)
    return dest


def _stage_office(repos: Dict[str, Path], dest: Path) -> dict:
    names = stage(repos["superglue_repo"], repos["edgeicp_repo"], dest)
    return {"frames_source": dict(FRAMES, files=len(names)), "ground_truth_source": GROUND_TRUTH}


def _stage_cabinet(repos: Dict[str, Path], dest: Path) -> dict:
    names = stage_cabinet(repos["cubeslam_repo"], dest)
    return {"source": dict(CABINET, files=len(names))}


@dataclass(frozen=True)
class RealSet:
    """One real validation set: the repositories it is read from (``(argument, source)``), how
    its TUM-style folder is staged from them (returning its provenance for ``meta.json``),
    where it goes, and where its inputs lie in those repositories (``(frame suffix, (source,
    frames folder), (source, ground truth path))``, for ``make_real_reloc``'s sha256 list)."""

    traj_name: str
    out: str
    dataset: dict
    repos: Tuple[Tuple[str, dict], ...]
    stage: Callable[[Dict[str, Path], Path], dict]
    origin: dict
    inputs: Tuple[str, Tuple[dict, str], Tuple[dict, str]]


def real_sets() -> Dict[str, RealSet]:
    """The real sets by name (built when called, from the sources above as they are then)."""
    return {
        "office": RealSet(TRAJ_NAME, "data/real_val", DATASET,
                          (("superglue_repo", FRAMES), ("edgeicp_repo", GROUND_TRUTH)),
                          _stage_office, {"frames": FRAMES, "ground_truth": GROUND_TRUTH},
                          (".png", (FRAMES, FRAMES["path"]),
                           (GROUND_TRUTH, GROUND_TRUTH["path"]))),
        "cabinet": RealSet(CABINET_TRAJ_NAME, "data/real_val_cabinet", CABINET_DATASET,
                           (("cubeslam_repo", CABINET),), _stage_cabinet, {"source": CABINET},
                           (".jpg", (CABINET, CABINET["frames"]),
                            (CABINET, CABINET["ground_truth"]))),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--superglue-repo", type=Path, help="clone / mirror of " + FRAMES["repo"])
    p.add_argument("--edgeicp-repo", type=Path, help="clone / mirror of " + GROUND_TRUTH["repo"])
    p.add_argument("--cubeslam-repo", type=Path,
                   help="clone / mirror of " + CABINET["repo"] + ": the fr3 cabinet set "
                   "instead of the office")
    p.add_argument("--clone-into", type=Path, help="clone missing repositories from GitHub here")
    p.add_argument("--out", type=Path, default=None,
                   help="default: data/real_val (office), data/real_val_cabinet (cabinet)")
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    cabinet = args.cubeslam_repo is not None
    if cabinet and (args.superglue_repo or args.edgeicp_repo):
        p.error("--cubeslam-repo builds the cabinet set alone: leave out --superglue-repo and "
                "--edgeicp-repo")
    real = real_sets()["cabinet" if cabinet else "office"]
    repos = {}
    for key, src in real.repos:
        path = getattr(args, key)
        if path is None:
            if args.clone_into is None:
                p.error(f"--{key.replace('_', '-')} or --clone-into is required")
            path = _clone(src["repo"], args.clone_into)
        if not path.exists():
            p.error(f"{path}: does not exist")
        repos[key] = path
    out = args.out or Path(real.out)
    out.mkdir(parents=True, exist_ok=True)
    traj = out / real.traj_name
    try:
        if args.overwrite or not is_complete(traj):
            with tempfile.TemporaryDirectory() as tmp:
                meta = {"dataset": real.dataset, **real.stage(repos, Path(tmp))}
                convert_tum(tmp, traj, camera="fr3", meta=meta, overwrite=args.overwrite)
        summary = write_window_pairs(out, real.traj_name, CAMERA_NAME, PAIR_SETS, PROXY_DEPTH_M)
    except ValueError as exc:
        print(f"make_real_val: error: {exc}", file=sys.stderr)
        return 2
    reader = TrajectoryReader(traj)
    summary = {"trajectory": str(traj), "frames": reader.num_frames, **summary}
    (out / "sources.json").write_text(json.dumps(
        {"dataset": real.dataset, **real.origin, "proxy_depth_m": PROXY_DEPTH_M,
         "summary": summary}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
