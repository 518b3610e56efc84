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
  groundtruth.txt``, the benchmark's motion-capture trajectory of the same sequence (100 Hz).

Usage (clones anywhere; ``--clone-into DIR`` clones from GitHub when the paths are not given)::

    python tools/make_real_val.py --superglue-repo ~/src/SuperGluePretrainedNetwork \
        --edgeicp-repo ~/src/edgeICP --out data/real_val

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
from pathlib import Path

import numpy as np

from g2g_model.data.convert_tum import CAMERA_NAME, convert_tum
from g2g_model.data.format import TrajectoryReader, is_complete
from g2g_model.data.frustum_pairs import frustum_overlap_matrix, frustum_window_pairs
from g2g_model.data.mining import write_index

TRAJ_NAME = "tum_fr3_office"
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


def build_pairs(out: Path) -> dict:
    return write_window_pairs(out, TRAJ_NAME, CAMERA_NAME, PAIR_SETS, PROXY_DEPTH_M)


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--superglue-repo", type=Path, help="clone / mirror of " + FRAMES["repo"])
    p.add_argument("--edgeicp-repo", type=Path, help="clone / mirror of " + GROUND_TRUTH["repo"])
    p.add_argument("--clone-into", type=Path, help="clone missing repositories from GitHub here")
    p.add_argument("--out", type=Path, default=Path("data/real_val"))
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    repos = {}
    for key, src in (("superglue_repo", FRAMES), ("edgeicp_repo", GROUND_TRUTH)):
        path = getattr(args, key)
        if path is None:
            if args.clone_into is None:
                p.error(f"--{key.replace('_', '-')} or --clone-into is required")
            path = _clone(src["repo"], args.clone_into)
        if not path.exists():
            p.error(f"{path}: does not exist")
        repos[key] = path
    args.out.mkdir(parents=True, exist_ok=True)
    traj = args.out / TRAJ_NAME
    try:
        if args.overwrite or not is_complete(traj):
            with tempfile.TemporaryDirectory() as tmp:
                names = stage(repos["superglue_repo"], repos["edgeicp_repo"], Path(tmp))
                meta = {"dataset": DATASET, "frames_source": dict(FRAMES, files=len(names)),
                        "ground_truth_source": GROUND_TRUTH}
                convert_tum(tmp, traj, camera="fr3", meta=meta, overwrite=args.overwrite)
        summary = build_pairs(args.out)
    except ValueError as exc:
        print(f"make_real_val: error: {exc}", file=sys.stderr)
        return 2
    reader = TrajectoryReader(traj)
    summary = {"trajectory": str(traj), "frames": reader.num_frames, **summary}
    (args.out / "sources.json").write_text(json.dumps(
        {"dataset": DATASET, "frames": FRAMES, "ground_truth": GROUND_TRUTH,
         "proxy_depth_m": PROXY_DEPTH_M, "summary": summary}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
