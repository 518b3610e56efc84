"""One end-to-end measurement of localizing a query in a simulated map (run in a fresh process).

``bench_covisibility --end-to-end`` starts this module once per case, so that each case's peak
resident memory (``getrusage(RUSAGE_SELF).ru_maxrss``, the high-water mark of the process) is
its own. The last line printed is a JSON record.

Cases (``--case``):

* ``localize``: load the shipped models and the map (tokens precomputed), read the query's
  images from disk, then, timed: encode the query frames one by one (per-frame tokens), pick
  the map window for the whole query with the relocalize node's own
  :class:`~g2g_model.localization.window_selector.WindowSelector` (``--coarse-stride`` for the
  decoder; 1 = full scoring), and run G2G on that map window (images decoded from the map) and
  the ``W`` consecutive query frames that match it best. After the timed part (outside the
  timings and the peak figure): the true overlap of the chosen (map, query) window against
  the best one and the error of the predicted query pose.
  ``--scorer verified`` (the relocalize node's default: the mean of the shipped token and image
  covisibility embeddings, whose 8 best distinct places over all cameras the shipped pair
  verifier re-ranks), ``combined`` (the same without re-ranking), ``embedding``, ``image`` or
  ``whitened`` (map-whitened token similarity) score without the decoder; what they need of
  the whole map (its token statistics or whitening, its decoded images, the descriptors of all
  map frames, the verifier's shrunk map images: ``WindowSelector.prepare``) is a separate
  stage, done once when the node loads the map, outside ``localize_s``.
* ``encode-map``: decode every map image and encode them all (what building the map costs, and
  what the paper's 9 s figure includes).

    python -m benchmarks.covis_end_to_end --case localize --coarse-stride 8
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
import time
from typing import Dict, List, Optional

import numpy as np
import torch

LOG = logging.getLogger(__name__)

CASES = ("localize", "encode-map")


def rss_mib() -> Dict[str, float]:
    """Current and peak resident set size of this process (MiB)."""
    current = float("nan")
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    current = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    return {"rss_mib": round(current, 1), "peak_rss_mib": round(peak, 1)}


class Stages:
    """Wall time and memory after each named stage."""

    def __init__(self):
        self.records: List[Dict] = [{"stage": "start", "seconds": 0.0, **rss_mib()}]
        self._t0 = time.perf_counter()

    def mark(self, name: str, **extra) -> None:
        now = time.perf_counter()
        self.records.append({"stage": name, "seconds": round(now - self._t0, 4), **rss_mib(),
                             **extra})
        self._t0 = time.perf_counter()

    def seconds(self, *names: str) -> float:
        return sum(r["seconds"] for r in self.records if r["stage"] in names)


def _pose_error(predicted: np.ndarray, true: np.ndarray) -> Dict[str, float]:
    from g2g_model.geometry import relative_pose, rotation_angle_deg

    rel = relative_pose(true, predicted)
    return {"translation_m": round(float(np.linalg.norm(rel[:3, 3])), 3),
            "rotation_deg": round(float(rotation_angle_deg(rel[:3, :3])), 2)}


def localize(scene, query_camera: str, query_start: int, query_frames: int, window: int,
             coarse_stride: int, scorer: str = "covisibility") -> Dict:
    """The ``localize`` case (see the module docstring)."""
    from g2g_model.covisibility.retrieval import window_scores
    from g2g_model.estimation.groups import Group
    from g2g_model.estimation.pipeline import G2GPipeline
    from g2g_model.assets import default_checkpoint
    from g2g_model.localization.selector_config import SelectorConfig
    from g2g_model.localization.window_selector import WindowSelector
    from g2g_model.maps.format import load_map

    from benchmarks.sim_map import map_path, query_group, trajectory, true_overlap

    stages = Stages()
    pipeline = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"))
    encoder = pipeline.backbone_id()
    # The relocalize node's window selection: "verified" is its default (combined, re-ranked
    # by the shipped pair verifier); the others without re-ranking.
    config = SelectorConfig(scorer="combined" if scorer == "verified" else scorer,
                            pair_verifier="" if scorer == "verified" else "none",
                            window_size=window, coarse_stride=coarse_stride)
    selector = WindowSelector.from_config(config, pipeline, LOG.info, LOG.warning)
    stages.mark("load models")
    gmap = load_map(map_path(scene, encoder), expect_backbone=encoder)
    stages.mark("load map", frames=len(gmap), features=list(gmap.features.shape))
    selector.prepare(gmap)  # as the relocalize node prepares a map at load
    if scorer == "whitened":
        stages.mark("fit map whitening, describe map")
    elif scorer != "covisibility":
        stages.mark("load embedding(s), map statistics, decode and describe map")
    reader_b = trajectory(scene, 1)
    q_idx = list(range(query_start, query_start + query_frames))
    query = query_group(reader_b, query_camera, q_idx)
    stages.mark("read query images")

    query_tokens = pipeline.encode_frames(query.images, query.intrinsics)
    stages.mark("encode query")
    pick = selector.select(query, None, query_tokens)
    window_rows = selector.prepared.windows[pick.index]
    # G2G runs on the W consecutive query frames that match the chosen window best.
    sub_start = int(np.argmax(window_scores(pick.block, window)[0]))
    sub = np.arange(sub_start, sub_start + window)
    stages.mark("score + select", pairs_scored=pick.pairs_scored,
                pairs_full=len(gmap) * query_frames)
    frames_a = [gmap.frames[int(i)] for i in window_rows]
    group_a = Group(images=[f.decode() for f in frames_a],
                    intrinsics=np.stack([f.intrinsics for f in frames_a]),
                    cam_to_world=np.stack([f.world_T_cam for f in frames_a]))
    group_b = Group(images=[query.images[j] for j in sub], intrinsics=query.intrinsics,
                    cam_to_world=np.asarray(query.cam_to_world)[sub])
    prediction = pipeline.predict(group_a, group_b)
    stages.mark("g2g", g2g_timing_ms={k: round(v, 1) for k, v in
                                      prediction.timing_ms.items()})
    peak_localize = rss_mib()

    # --- not timed: how good the choice was, and the window choice alone on the scores
    cam = frames_a[0].camera
    rows = gmap.camera_indices(cam)
    map_start = int(np.flatnonzero(rows == window_rows[0])[0])
    t0 = time.perf_counter()
    window_scores(pick.block, window)
    select_ms = 1e3 * (time.perf_counter() - t0)
    map_reader = trajectory(scene, 0)
    best_true, chosen_true = -1.0, None
    for c in gmap.cameras():
        ws = window_scores(true_overlap(map_reader, c, reader_b, query_camera, q_idx), window)
        best_true = max(best_true, float(ws.max()))
        if c == cam:
            chosen_true = float(ws[map_start, sub_start])
    true_b0 = np.asarray(query.cam_to_world)[sub[0]]
    return {
        "case": "localize", "scorer": scorer, "coarse_stride": coarse_stride, "window": window,
        "query": {"camera": query_camera, "frames": [q_idx[0], q_idx[-1]]},
        "stages": stages.records,
        "localize_s": round(stages.seconds("encode query", "score + select", "g2g"), 3),
        "peak_after_localize": peak_localize,
        "chosen": {"camera": cam, "map_frames": [int(window_rows[0]), int(window_rows[-1])],
                   "query_frames": [int(q_idx[sub[0]]), int(q_idx[sub[-1]])],
                   "score": round(float(np.nan_to_num(pick.score)), 4), "how": pick.how,
                   "verification": (round(pick.verification, 4)
                                    if np.isfinite(pick.verification) else None)},
        "selection_only_ms": round(select_ms, 2),
        "true_window_overlap": {"chosen": round(chosen_true, 4), "best": round(best_true, 4)},
        "query_b0_error": _pose_error(prediction.world_T_b[0], true_b0),
    }


def encode_map(scene, batch_size: int) -> Dict:
    """The ``encode-map`` case: decode and encode every map frame."""
    from g2g_model.estimation.pipeline import G2GPipeline
    from g2g_model.assets import default_checkpoint
    from g2g_model.maps.format import load_map

    from benchmarks.sim_map import map_path

    stages = Stages()
    pipeline = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"))
    stages.mark("load model")
    path = map_path(scene, pipeline.backbone_id())
    gmap = load_map(path, expect_backbone=pipeline.backbone_id(), load_features=False)
    stages.mark("load map (no features)", frames=len(gmap))
    images = [f.decode() for f in gmap.frames]
    stages.mark("decode images")
    tokens = pipeline.encode_frames(images, np.stack([f.intrinsics for f in gmap.frames]),
                                    batch_size=batch_size)
    stages.mark("encode all frames", tokens=list(tokens.shape))
    stored = load_map(path, expect_backbone=pipeline.backbone_id()).features
    return {"case": "encode-map", "batch_size": batch_size, "stages": stages.records,
            "encode_s": round(stages.seconds("encode all frames"), 3),
            "max_abs_diff_vs_stored_fp16": float((tokens - stored.float()).abs().max())}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", choices=CASES, required=True)
    parser.add_argument("--scene", required=True, help="scene directory of benchmarks.sim_map")
    parser.add_argument("--query-camera", default="cam0")
    parser.add_argument("--query-start", type=int, default=0)
    parser.add_argument("--query-frames", type=int, default=30)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--coarse-stride", type=int, default=1)
    parser.add_argument("--scorer", choices=("covisibility", "verified", "combined",
                                             "embedding", "image", "whitened"),
                        default="covisibility",
                        help="localize: the covisibility decoder, the embeddings (re-ranked "
                             "by the pair verifier or not) or map-whitened similarity")
    parser.add_argument("--batch-size", type=int, default=256,
                        help="frames per encoder pass (encode-map)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.case == "localize":
        record = localize(args.scene, args.query_camera, args.query_start, args.query_frames,
                          args.window, args.coarse_stride, args.scorer)
    else:
        record = encode_map(args.scene, args.batch_size)
    record["torch_threads"] = torch.get_num_threads()
    print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
