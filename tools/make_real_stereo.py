#!/usr/bin/env python3
"""Build the real stereo car set ``data/real_stereo_kitti`` from a public git repository, for
evaluation only.

Nothing of the data is in this repository: the tool reads the files out of a local clone (or
bare mirror) of ``niconielsen32/VisualSLAM`` at a pinned commit (``git show <commit>:<path>``)
and converts them into the dataset format (docs/DATASET_FORMAT.md).

Source: the folders ``KITTI_sequence_1`` and ``KITTI_sequence_2`` of that repository, two clips of
the KITTI odometry benchmark (a car's forward stereo pair: rectified 8-bit grey images, 0.54 m
baseline, no lens distortion left): ``image_l/`` and ``image_r/`` (51 PNGs each), ``calib.txt``
(the two 3 x 4 projection matrices P0, P1 on two unlabelled lines) and ``poses.txt`` (51 lines,
the left camera's 3 x 4 pose in the first frame's left camera, KITTI's ground truth). They are
frames 0-50 of KITTI sequence 06 (1226 x 370, 1.19-1.21 m per frame, nearly straight) and of
sequence 01 (1241 x 376, 0.95-1.27 m per frame, a highway ramp turning about 2 deg per
frame): the pose files equal those sequences' published ground truth (checked against the
official ``poses/06.txt`` and ``01.txt`` to 2e-8). Licence: KITTI's, Creative Commons
Attribution-NonCommercial-ShareAlike 3.0 (A. Geiger, P. Lenz, R. Urtasun, "Are we ready for
autonomous driving? The KITTI vision benchmark suite", CVPR 2012); the host repository has no
licence of its own. Used for evaluation only, never committed or redistributed.

Conversion: the body is the left camera with the fixed optical-to-REP-103 ``T_body_cam`` (x
forward, y left, z up), the world the body at the first frame (z up: the car is level); the
right camera sits ``-P1[0, 3] / P1[0, 0]`` metres to the left
camera's right; grey images are stored as RGB (three equal channels); time stamps are 0.1 s
apart (KITTI's cameras run at about 10 Hz; the exact times are not in the source). The sha256 of
every file read is recorded in ``sources.json``, and the conversion stops if a pose or
calibration file differs from the recorded one.

Usage::

    python tools/make_real_stereo.py --visualslam-repo /path/to/VisualSLAM \
        --out data/real_stereo_kitti
    g2g-data rig-pairs data/real_stereo_kitti --min-distance 1 --max-distance 3 \
        --min-frame-gap 1 --max-frame-gap 3 --out data/real_stereo_kitti/rig_car_steps.csv

It also writes relocalization window pairs of the left camera along each drive
(``pairs_w3.json``, ``pairs_w5.json``: windows 4-10 m apart, scored by the pose-only overlap
proxy, :mod:`g2g_model.data.frustum_pairs`), the real outdoor validation of ``g2g-eval --task
reloc``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_real_fullsize import resolve_commit  # noqa: E402
from make_real_val import git_show  # noqa: E402

from g2g_model.data.convert_tum import T_BODY_OPTICAL  # noqa: E402
from g2g_model.data.format import TrajectoryReader, TrajectoryWriter, is_complete  # noqa: E402
from g2g_model.data.frustum_pairs import (  # noqa: E402
    frustum_overlap_matrix, frustum_window_pairs,
)
from g2g_model.data.mining import write_index  # noqa: E402
from g2g_model.data.rig import CameraSpec, Rig  # noqa: E402
from g2g_model.geometry import invert_pose  # noqa: E402

SOURCE = {
    "repo": "niconielsen32/VisualSLAM",
    "commit": "13122eaadb0764a65a267598ce3a0e979427ccaa",
    "license": "KITTI odometry benchmark data: Creative Commons Attribution-NonCommercial-"
               "ShareAlike 3.0 (Geiger, Lenz, Urtasun, CVPR 2012); the host repository has no "
               "licence file. Used for evaluation only, not redistributed.",
}
# folder in the source -> (trajectory name, KITTI sequence, sha256 of calib.txt, of poses.txt)
CLIPS = {
    "KITTI_sequence_1": ("kitti06_0000_0050", "06",
                         "6935f9fa72a67b60a89277d3044e4a164c507156de37b0a55212f08bbb551fc1",
                         "da9f1248f88cc264d995a2890e6e78d0432d73e982420000345aeae47147e8ab"),
    "KITTI_sequence_2": ("kitti01_0000_0050", "01",
                         "37d272c8377c47e80170bd0bc54ccbbbb25d0bd11a9c53645d509d4985bac522",
                         "7cb2a0b98f2ceb47f0424d965a3d244832419293002be20dc8c7c3ac9c5a90db"),
}
FRAMES = 51
# Relocalization window pairs of the left camera: windows of W frames, G frames apart (1.0-1.2 m
# per frame: windows 3.5-6 m long, 4-10 m apart), scored by the pose-only overlap proxy at a
# street's depth.
PAIR_GAPS = {3: (4, 5, 6), 5: (5, 6, 7, 8)}
PROXY_DEPTH_M = 15.0
PERIOD_NS = 100_000_000
CAMERAS = ("left", "right")
SUBFOLDERS = ("image_l", "image_r")


def stereo_rig(projections: np.ndarray, width: int, height: int) -> Rig:
    """The rig of a rectified KITTI stereo pair from its projection matrices ``[2, 3, 4]``:
    both share K; the right camera is ``-P1[0, 3] / fx`` metres along the left's x axis."""
    K = projections[0][:, :3]
    if not np.allclose(projections[1][:, :3], K):
        raise ValueError("the two projection matrices have different intrinsics (not rectified)")
    baseline = -projections[1][0, 3] / K[0, 0]
    if not 0.05 < baseline < 5.0:
        raise ValueError(f"implausible stereo baseline {baseline:.3f} m")
    cam_right = np.eye(4)
    cam_right[0, 3] = baseline
    return Rig([CameraSpec(name=name, K=K.copy(), width=width, height=height,
                           T_body_cam=T_BODY_OPTICAL @ left_T_cam)
                for name, left_T_cam in zip(CAMERAS, (np.eye(4), cam_right))])


def read_text(repo: Path, commit: str, path: str, expected: str, sha: dict) -> np.ndarray:
    raw = git_show(repo, commit, path)
    sha[path] = hashlib.sha256(raw).hexdigest()
    if sha[path] != expected:
        raise ValueError(f"{path}: sha256 {sha[path]} is not the recorded {expected}")
    return np.array(raw.decode().split(), float)


def _grey_rgb(repo: Path, commit: str, path: str, sha: dict) -> np.ndarray:
    """A grey PNG of the source as an RGB array (three equal channels); its sha256 recorded."""
    data = git_show(repo, commit, path)
    sha[path] = hashlib.sha256(data).hexdigest()
    grey = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE)
    if grey is None:
        raise ValueError(f"{path}: not an image (a Git LFS pointer?)")
    return np.repeat(grey[:, :, None], 3, axis=2)


def convert_clip(repo: Path, commit: str, folder: str, traj: Path, overwrite: bool) -> dict:
    name, sequence, calib_sha, poses_sha = CLIPS[folder]
    sha: dict = {}
    projections = read_text(repo, commit, f"{folder}/calib.txt", calib_sha, sha).reshape(2, 3, 4)
    poses = read_text(repo, commit, f"{folder}/poses.txt", poses_sha, sha).reshape(-1, 3, 4)
    if len(poses) != FRAMES:
        raise ValueError(f"{folder}/poses.txt: {len(poses)} poses, expected {FRAMES}")
    world_T_left = np.tile(np.eye(4), (FRAMES, 1, 1))
    world_T_left[:, :3] = poses
    meta = {"source": "tools/make_real_stereo.py", "dataset_source": dict(SOURCE, path=folder),
            "kitti_sequence": sequence, "kitti_frames": [0, FRAMES - 1],
            "timestamps": "0.1 s apart (nominal; KITTI's cameras run at about 10 Hz)"}
    first = {cam: _grey_rgb(repo, commit, f"{folder}/{sub}/{0:06d}.png", sha)
             for cam, sub in zip(CAMERAS, SUBFOLDERS)}
    height, width = first["left"].shape[:2]
    rig = stereo_rig(projections, width, height)
    meta["baseline_m"] = float(-rig["right"].T_body_cam[1, 3])
    with TrajectoryWriter(traj, rig, with_depth=False, overwrite=overwrite, meta=meta) as w:
        for k in range(FRAMES):
            images = first if k == 0 else {
                cam: _grey_rgb(repo, commit, f"{folder}/{sub}/{k:06d}.png", sha)
                for cam, sub in zip(CAMERAS, SUBFOLDERS)}
            w.add_frame(PERIOD_NS * (k + 1), T_BODY_OPTICAL @ world_T_left[k] @ invert_pose(
                T_BODY_OPTICAL), images)
    steps = np.linalg.norm(np.diff(world_T_left[:, :3, 3], axis=0), axis=1)
    return {"trajectory": name, "kitti_sequence": sequence, "frames": FRAMES,
            "size": [int(width), int(height)],
            "step_m": [round(float(steps.min()), 3), round(float(steps.mean()), 3),
                       round(float(steps.max()), 3)], "sha256": sha}


def window_pairs(out: Path, names, min_score: float = 0.3) -> dict:
    """``pairs_w{W}.json`` of every clip's left camera (relocalization windows along the
    drive), merged; their counts."""
    summary = {}
    for window, gaps in PAIR_GAPS.items():
        pairs = []
        for name in names:
            reader = TrajectoryReader(out / name)
            cam = reader.rig["left"]
            overlap = frustum_overlap_matrix(cam.K, cam.width, cam.height,
                                             reader.world_T_cam("left"), depth_m=PROXY_DEPTH_M)
            pairs += frustum_window_pairs(overlap, name, "left", window, gaps,
                                          min_score=min_score)
        if not pairs:
            raise ValueError(f"no window pair of {window} frames scores >= {min_score}")
        write_index(pairs, out / f"pairs_w{window}.json")
        summary[f"pairs_w{window}"] = len(pairs)
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--visualslam-repo", type=Path, required=True,
                   help="clone or bare mirror (git dir) of " + SOURCE["repo"])
    p.add_argument("--commit", default=SOURCE["commit"],
                   help="commit to read (default: the pinned one)")
    p.add_argument("--out", type=Path, default=Path("data/real_stereo_kitti"))
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    if not args.visualslam_repo.exists():
        p.error(f"{args.visualslam_repo}: does not exist")
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    clips = {}
    record = args.out / "sources.json"
    earlier = json.loads(record.read_text()).get("clips", {}) if record.exists() else {}
    try:
        commit = resolve_commit(args.visualslam_repo, args.commit)
        for folder, (name, *_) in CLIPS.items():
            traj = args.out / name
            if args.overwrite or not is_complete(traj):
                clips[name] = convert_clip(args.visualslam_repo, commit, folder, traj,
                                           args.overwrite)
            else:  # kept: its record of the earlier conversion stays
                clips[name] = earlier.get(name) or {"trajectory": name,
                                                    "kept": "already complete"}
        pairs = window_pairs(args.out, list(clips))
    except ValueError as exc:
        print(f"make_real_stereo: error: {exc}", file=sys.stderr)
        return 2
    (args.out / "sources.json").write_text(json.dumps(
        {"dataset": dict(SOURCE, commit=commit), "clips": clips, "window_pairs": pairs,
         "seconds": round(time.time() - t0, 1)}, indent=1) + "\n")
    print(json.dumps({**{name: {k: v for k, v in c.items() if k != "sha256"}
                         for name, c in clips.items()}, "window_pairs": pairs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
