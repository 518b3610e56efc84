#!/usr/bin/env python3
"""Build the real full-size (about 2 MP) image set ``data/real_fullsize`` from a public git
repository, for evaluation only.

Nothing of the data is in this repository: the tool reads the files out of a local clone (or
bare mirror) of ``NVlabs/instant-ngp`` at a pinned commit (``git show <commit>:<path>``),
converts them into the dataset format (docs/DATASET_FORMAT.md) and writes window-pair indices.

Source: ``data/nerf/fox`` of instant-ngp: JPEG photographs (1080 x 1920 portrait, a phone) of a
mounted fox head on a wall, taken on an arc around it, and ``transforms.json``: one OpenCV camera
(``fl_x fl_y cx cy k1 k2 p1 p2``) and per image a camera-to-world matrix with OpenGL camera
axes, from COLMAP (re-centred and scaled by colmap2nerf: the scale is arbitrary). At the pinned
commit the tree holds 50 of the 67 images ``transforms.json`` lists; the 50 are used. Licence:
the repository's LICENSE.txt (NVIDIA Source Code License, non-commercial: research or evaluation
only); the repository says nothing else about the fox data.

Conversion:

* poses: OpenGL camera axes -> OpenCV (:mod:`g2g_model.data.nerf_transforms`), the
  translation scaled by ``--metres-per-unit`` (default 0.08: the cameras are 4-6 units from the
  fox, whose head and plaque, about 0.45 m tall, fill some 70 % of the 70 deg vertical view, so
  about 0.3-0.5 m away). The world is colmap2nerf's, z up (the mean camera up is +z);
  the body is the camera with the fixed optical-to-REP-103 ``T_body_cam``;
* lens: the images are rectified once with the file's ``plumb_bob`` lens
  (:class:`g2g_model.cameras.lens.Rectifier`, alpha 0: every pixel from the image); the
  dataset stores the rectified pinhole K;
* time stamps: 1 s apart in file-name order (the capture times are not known);
* pairs: ``pairs_w3.json`` and ``pairs_w5.json``, window pairs ``--gaps`` apart scored by the
  pose-only overlap proxy (``g2g_model.data.frustum_pairs``) at the cameras' median distance to
  the point their optical axes pass closest to; pairs scoring below ``--min-score`` are left out.

Sanity check of the converted poses (``sources.json`` ``epipolar``): SIFT matches between
neighbouring frames (ratio 0.75) and their distance to the epipolar line the poses predict (px,
symmetric, on the rectified images); a wrong axis convention or lens puts the median far above
a pixel or two.

Usage::

    python tools/make_real_fullsize.py --instant-ngp-repo /path/to/instant-ngp \
        --out data/real_fullsize
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

from make_real_val import git_ls, git_show, write_window_pairs  # noqa: E402

from g2g_model.cameras.lens import Rectifier  # noqa: E402
from g2g_model.data.convert_tum import T_BODY_OPTICAL  # noqa: E402
from g2g_model.data.format import TrajectoryReader, TrajectoryWriter, is_complete  # noqa: E402
from g2g_model.data.nerf_transforms import opencv_cam_to_world, transforms_lens  # noqa: E402
from g2g_model.data.rig import CameraSpec, Rig  # noqa: E402
from g2g_model.geometry import invert_pose  # noqa: E402

TRAJ_NAME = "fox"
CAMERA_NAME = "cam0"
SOURCE = {
    "repo": "NVlabs/instant-ngp",
    "commit": "abe236ee00cf90cfca6e36e65c00435d5b21f50a",
    "path": "data/nerf/fox",
    "license": "repository LICENSE.txt: NVIDIA Source Code License for instant neural graphics "
               "primitives (non-commercial: research or evaluation only); nothing further is "
               "said about the fox photographs. Used for evaluation only, not redistributed.",
}
PAIR_GAPS = {3: (3, 4, 5, 6), 5: (5, 6, 7, 8)}
DEFAULT_METRES_PER_UNIT = 0.08


def resolve_commit(repo: Path, commit: str) -> str:
    """The full hash of ``commit`` (a prefix or a name) in ``repo``."""
    import subprocess

    res = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", commit + "^{commit}"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise ValueError(f"{repo}: no commit {commit} ({res.stderr.strip()})")
    return res.stdout.strip()


def look_at_point(world_T_cam: np.ndarray) -> np.ndarray:
    """The point closest (least squares) to every camera's optical axis (OpenCV: +z)."""
    A, b = np.zeros((3, 3)), np.zeros(3)
    for T in world_T_cam:
        d = T[:3, 2]
        M = np.eye(3) - np.outer(d, d)
        A += M
        b += M @ T[:3, 3]
    return np.linalg.solve(A, b)


def epipolar_check(images: list, K: np.ndarray, world_T_cam: np.ndarray) -> dict:
    """Median symmetric epipolar distance (px) of SIFT matches between neighbouring frames."""
    sift = cv2.SIFT_create(4000)
    feats = [sift.detectAndCompute(cv2.cvtColor(im, cv2.COLOR_RGB2GRAY), None) for im in images]
    matcher = cv2.BFMatcher(cv2.NORM_L2)
    Kinv = np.linalg.inv(K)
    per_pair, all_d = [], []
    for i in range(len(images) - 1):
        (ka, da), (kb, db) = feats[i], feats[i + 1]
        good = [m for m, n in matcher.knnMatch(da, db, k=2) if m.distance < 0.75 * n.distance]
        if len(good) < 8:
            per_pair.append(None)
            continue
        xa = np.array([ka[m.queryIdx].pt for m in good])
        xb = np.array([kb[m.trainIdx].pt for m in good])
        b_T_a = invert_pose(world_T_cam[i + 1]) @ world_T_cam[i]
        t = b_T_a[:3, 3]
        tx = np.array([[0, -t[2], t[1]], [t[2], 0, -t[0]], [-t[1], t[0], 0]])
        F = Kinv.T @ tx @ b_T_a[:3, :3] @ Kinv
        ha, hb = np.c_[xa, np.ones(len(xa))], np.c_[xb, np.ones(len(xb))]
        la, lb = ha @ F.T, hb @ F                   # lines in b (of points a), in a
        num = np.abs(np.sum(hb * la, axis=1))
        d = 0.5 * (num / np.hypot(la[:, 0], la[:, 1]) + num / np.hypot(lb[:, 0], lb[:, 1]))
        per_pair.append(round(float(np.median(d)), 3))
        all_d.append(d)
    d = np.concatenate(all_d)
    valid = [v for v in per_pair if v is not None]
    return {"pairs": len(valid), "matches": int(d.size),
            "median_px": round(float(np.median(d)), 3),
            "share_within_2px": round(float(np.mean(d < 2.0)), 3),
            "pair_median_px_median": round(float(np.median(valid)), 3),
            "pair_median_px_max": round(float(np.max(valid)), 3), "per_pair_median_px": per_pair}


def convert(repo: Path, commit: str, traj: Path, metres_per_unit: float, overwrite: bool
            ) -> dict:
    """Write the trajectory; return the inputs' sha256 and what the conversion decided."""
    root = SOURCE["path"]
    raw = git_show(repo, commit, f"{root}/transforms.json")
    transforms = json.loads(raw)
    sha = {f"{root}/transforms.json": hashlib.sha256(raw).hexdigest()}
    present = set(git_ls(repo, commit, f"{root}/images"))
    frames = [f for f in transforms["frames"] if f"{root}/{f['file_path']}" in present]
    frames.sort(key=lambda f: f["file_path"])
    if len(frames) < 10:
        raise ValueError(f"{repo}: only {len(frames)} of the listed images are present")
    lens = transforms_lens(transforms, CAMERA_NAME)
    rectify = Rectifier(lens)
    poses = np.stack([opencv_cam_to_world(f["transform_matrix"], metres_per_unit)
                      for f in frames])
    rig = Rig([CameraSpec(name=CAMERA_NAME, K=rectify.K, width=lens.width, height=lens.height,
                          T_body_cam=T_BODY_OPTICAL)])
    body_T_cam_inv = invert_pose(T_BODY_OPTICAL)
    images = []
    meta = {"source": "tools/make_real_fullsize.py", "dataset_source": SOURCE,
            "metres_per_unit": metres_per_unit, "lens": lens.describe(),
            "lens_K": lens.K.tolist(), "rectified": "once, plumb_bob -> pinhole (alpha 0)",
            "frames_listed": len(transforms["frames"]), "frames_present": len(frames),
            "timestamps": "1 s apart in file-name order (capture times unknown)",
            "files": [f["file_path"] for f in frames]}
    with TrajectoryWriter(traj, rig, with_depth=False, overwrite=overwrite, meta=meta) as w:
        for k, (frame, world_T_cam) in enumerate(zip(frames, poses)):
            path = f"{root}/{frame['file_path']}"
            data = git_show(repo, commit, path)
            sha[path] = hashlib.sha256(data).hexdigest()
            bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
            if bgr is None or bgr.shape[:2] != (lens.height, lens.width):
                raise ValueError(f"{path}: not a {lens.width} x {lens.height} image "
                                 "(a Git LFS pointer?)")
            rgb = rectify(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
            images.append(rgb)
            w.add_frame(1_000_000_000 * (k + 1), world_T_cam @ body_T_cam_inv,
                        {CAMERA_NAME: rgb})
    return {"sha256": sha, "epipolar": epipolar_check(images, rectify.K, poses)}


def build_pairs(out: Path, min_score: float) -> dict:
    """Window pairs scored with the overlap proxy at the capture's median distance from the
    point the cameras look at (an orbit around one object)."""
    poses = TrajectoryReader(out / TRAJ_NAME).world_T_cam(CAMERA_NAME)
    depth = float(np.median(np.linalg.norm(poses[:, :3, 3] - look_at_point(poses), axis=1)))
    return {"proxy_depth_m": round(depth, 4),
            **write_window_pairs(out, TRAJ_NAME, CAMERA_NAME, PAIR_GAPS, depth, min_score)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--instant-ngp-repo", type=Path, required=True,
                   help="clone or bare mirror (git dir) of " + SOURCE["repo"])
    p.add_argument("--commit", default=SOURCE["commit"],
                   help="commit to read (default: the pinned one)")
    p.add_argument("--out", type=Path, default=Path("data/real_fullsize"))
    p.add_argument("--metres-per-unit", type=float, default=DEFAULT_METRES_PER_UNIT)
    p.add_argument("--min-score", type=float, default=0.3,
                   help="leave out window pairs whose overlap proxy scores below this")
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    if not args.instant_ngp_repo.exists():
        p.error(f"{args.instant_ngp_repo}: does not exist")
    args.out.mkdir(parents=True, exist_ok=True)
    traj = args.out / TRAJ_NAME
    t0 = time.time()
    try:
        commit = resolve_commit(args.instant_ngp_repo, args.commit)
        converted = {}
        if args.overwrite or not is_complete(traj):
            converted = convert(args.instant_ngp_repo, commit, traj, args.metres_per_unit,
                                args.overwrite)
        elif (args.out / "sources.json").exists():
            old = json.loads((args.out / "sources.json").read_text())
            converted = {k: old[k] for k in ("sha256", "epipolar") if k in old}
        summary = build_pairs(args.out, args.min_score)
    except ValueError as exc:
        print(f"make_real_fullsize: error: {exc}", file=sys.stderr)
        return 2
    reader = TrajectoryReader(traj)
    summary = {"trajectory": str(traj), "frames": reader.num_frames, **summary,
               "seconds": round(time.time() - t0, 1)}
    (args.out / "sources.json").write_text(json.dumps(
        {"dataset": dict(SOURCE, commit=commit), "metres_per_unit": args.metres_per_unit,
         "summary": summary, **converted}, indent=1) + "\n")
    epi = converted.get("epipolar", {})
    print(json.dumps(dict(summary, epipolar={k: v for k, v in epi.items()
                                             if k != "per_pair_median_px"}), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
