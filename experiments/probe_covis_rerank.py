"""Diagnostic: can geometric verification re-rank the default scorer's best map windows?
(docs/COVISIBILITY.md, "Honest assessment", re-ranking the default's best windows.)

Window selection as ``g2g-covis sim-eval`` scores it (W = 4, map = traversal 0 of a camera,
queries = every run of W frames of traversal 1, a pick is good within 0.1 of the best window's
true max-mean overlap). The relocalize node's default scorer (``combined``) proposes its top-K
map windows (starts at least 2 frames apart); each candidate is then verified: SIFT features
(500 per frame, grey 224 px), ratio-test matches (0.8), and the inliers of an essential matrix
fitted by RANSAC (1 px, the frames' own intrinsics) for every (map frame, query frame) pair of
the window. A candidate's verification is the max-mean over its pairs of
``log1p(inliers) / log1p(50)``, and the re-ranked pick maximises
``combined window score + weight * verification``.

It prints, per scene set: the rate of the best candidate (the ceiling of any re-ranking of
these candidates) and the re-ranked rate for each weight (weight 0: the default's own pick).

    python experiments/probe_covis_rerank.py --scenes data/sim_val data/sim_test --cache CACHE

``--cache`` is the scene token cache of ``g2g-covis`` (the frames are encoded once).
"""

from __future__ import annotations

import argparse
from typing import Dict, List, Tuple

import cv2
import numpy as np

from g2g_model.covisibility import sim_data, sim_eval, sim_selection
from g2g_model.covisibility.embedding import load_embedding
from g2g_model.covisibility.image_embedding import load_image_embedding
from g2g_model.covisibility.retrieval import select_windows, window_scores
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.assets import default_checkpoint

WINDOW = 4
TOLERANCE = 0.1
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0)
SATURATION = 50.0  # inliers at which the verification reads 1


class Verifier:
    """Inlier counts of SIFT matches under an essential matrix, cached per frame pair."""

    def __init__(self, images: List[np.ndarray], intrinsics: np.ndarray):
        self.sift = cv2.SIFT_create(nfeatures=500)
        self.matcher = cv2.BFMatcher(cv2.NORM_L2)
        self.images, self.intrinsics = images, intrinsics
        self.features: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
        self.pairs: Dict[Tuple[int, int], int] = {}

    def _features(self, frame: int):
        if frame not in self.features:
            grey = cv2.cvtColor(self.images[frame], cv2.COLOR_RGB2GRAY)
            keypoints, desc = self.sift.detectAndCompute(grey, None)
            points = np.float32([k.pt for k in keypoints]).reshape(-1, 2)
            self.features[frame] = (points, desc)
        return self.features[frame]

    def _normalised(self, frame: int, points: np.ndarray) -> Tuple[np.ndarray, float]:
        """Normalised image coordinates of ``points`` and the focal length in pixels (the
        stored intrinsics belong to the label resolution; they are scaled to the image)."""
        k = self.intrinsics[frame].astype(np.float64).copy()
        s = self.images[frame].shape[1] / (2.0 * (k[0, 2] + 0.5))
        k[:2] *= s
        k[:2, 2] += 0.5 * (s - 1.0)
        return (points - k[:2, 2]) / np.diag(k)[:2], float(k[0, 0])

    def inliers(self, a: int, b: int) -> int:
        if (a, b) in self.pairs:
            return self.pairs[a, b]
        (pa, da), (pb, db) = self._features(a), self._features(b)
        count = 0
        if da is not None and db is not None and len(da) >= 8 and len(db) >= 8:
            knn = self.matcher.knnMatch(da, db, k=2)
            good = [m[0] for m in knn if len(m) == 2 and m[0].distance < 0.8 * m[1].distance]
            if len(good) >= 8:
                na, focal = self._normalised(a, pa[[g.queryIdx for g in good]])
                nb, _ = self._normalised(b, pb[[g.trainIdx for g in good]])
                try:
                    _, mask = cv2.findEssentialMat(na, nb, np.eye(3), cv2.RANSAC, 0.999,
                                                   1.0 / focal)
                except cv2.error:
                    mask = None
                count = 0 if mask is None else int(mask.sum())
        self.pairs[a, b] = count
        return count


def scene_queries(pipeline, embedding, image_model, scene, cache, top_k: int) -> List[Dict]:
    """Per query: true window scores, the candidates' combined scores and verifications."""
    frames = sim_data.load_scene_frames(pipeline, scene, 2, cache_dir=cache)
    images = sim_data.scene_images(scene, frames)
    gmap, rows = sim_selection.scene_map(frames, images)
    selector = sim_selection.sim_selectors(WINDOW, embedding, image_model)["combined"]
    selector.prepare(gmap)
    combined = sim_selection.selector_scorer(selector, frames, images, rows)
    verifier = Verifier(images, frames.intrinsics)
    queries, scored = sim_eval.scored_window_queries(frames, WINDOW, {},
                                                     frame_scorers={"combined": combined})
    out = []
    for true, pred, (m, q) in zip(queries.trues, scored["combined"], queries.frames):
        picks = select_windows(pred, WINDOW, top_k=top_k, threshold=-np.inf, max_overlap=0.5,
                               suppress="map")
        cands = []
        for w in picks:
            counts = np.array([[verifier.inliers(m[i], j) for j in q] for i in w.map_indices],
                              dtype=np.float64)
            verification = window_scores(np.log1p(counts) / np.log1p(SATURATION), WINDOW)[0, 0]
            cands.append((w.map_start, w.score, verification))
        out.append({"true": window_scores(true, WINDOW)[:, 0], "cands": cands})
    return out


def rates(queries: List[Dict]) -> Dict[str, float]:
    def rate(pick) -> float:
        gaps = [q["true"].max() - q["true"][pick(q["cands"])] for q in queries]
        return round(float(np.mean(np.asarray(gaps) <= TOLERANCE + 1e-12)), 3)

    ceiling = [q["true"].max() - max(q["true"][x[0]] for x in q["cands"]) for q in queries]
    out = {"best candidate": round(float(np.mean(np.asarray(ceiling) <= TOLERANCE + 1e-12)), 3)}
    for weight in WEIGHTS:
        out[f"weight {weight}"] = rate(
            lambda c, w=weight: max(c, key=lambda x: x[1] + w * x[2])[0])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenes", nargs="+", required=True,
                    help="directories of sim scene_* folders, each reported on its own")
    ap.add_argument("--cache", help="scene token cache directory (g2g-covis --cache)")
    ap.add_argument("--top-k", type=int, default=8, help="candidate windows per query")
    args = ap.parse_args(argv)
    pipeline = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"))
    embedding, _ = load_embedding(default_checkpoint("covisibility_embedding"),
                                  expect_encoder=pipeline.backbone_id())
    image_model, _ = load_image_embedding(default_checkpoint("covisibility_image_embedding"))
    for root in args.scenes:
        queries = []
        for scene in sim_data.scene_dirs(root):
            queries += scene_queries(pipeline, embedding, image_model, scene, args.cache,
                                     args.top_k)
        print(f"{root}: {len(queries)} queries, top-{args.top_k} candidates: {rates(queries)}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
