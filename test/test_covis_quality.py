"""Map-window selection quality on held-out simulator scenes.

The scenes are generated here from seeds that no model saw and no setting was chosen on:
training used the training split's 0-95, validation 10000+, the test numbers in
docs/COVISIBILITY.md 20000+. They use the simulator settings of the training data (ring4 rig,
224 px, 100 frames per traversal). The protocol is ``g2g-covis sim-eval``'s: per camera, every
run of W = 4 (every-2nd) frames of traversal 1 is a query against the whole traversal 0 of that
camera; a pick is good when its true max-mean overlap is within 0.1 of the best window's.

Scorers: the relocalize node's default (``verified``: the best windows of ``combined``, the mean
of the shipped token and image covisibility embeddings, re-ranked by the shipped pair verifier),
``combined`` alone, each embedding alone, map-whitened token similarity, the shipped covisibility
decoder, and the mean-pooled descriptor.
"""

import numpy as np
import pytest

from g2g_model.covisibility.checkpoint import load_checkpoint
from g2g_model.covisibility.embedding import load_embedding
from g2g_model.covisibility.image_embedding import load_image_embedding
from g2g_model.covisibility.evaluate import picked_window_accuracy, window_selection_accuracy
from g2g_model.covisibility.pair_verifier import load_pair_verifier
from g2g_model.covisibility.sim_data import load_scene_frames, scene_images
from g2g_model.covisibility.sim_eval import decoder_scorer, noisy_hints, scored_window_queries
from g2g_model.covisibility.sim_selection import (scene_map, selector_ranking, selector_scorer,
                                                  sim_selectors)
from g2g_model.data.sim.generate import SimConfig, generate_trajectory
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.assets import default_checkpoint

HELD_OUT_SEEDS = (30000, 30001)
WINDOW = 4
GOAL = 0.90  # within 0.1 of the best window in at least 90 % of held-out queries
# Measured on these scenes (docs/COVISIBILITY.md) with the compact_mnv2 encoder's models; the
# floors sit ~0.03 under them, so that a regression fails and machine-to-machine float noise
# does not. (With the earlier compact encoder: verified 0.928, combined 0.816, embedding 0.625,
# whitened 0.654, decoder 0.269, descriptor 0.184, combined with a hint 0.856.)
MEASURED = {"verified": 0.938, "combined": 0.917, "image": 0.795, "embedding": 0.922,
            "whitened": 0.898, "decoder": 0.595, "descriptor": 0.632, "combined_hint": 0.930}
SCORERS = ("verified", "combined", "image", "embedding", "whitened", "decoder", "descriptor")
FLOOR = 0.03
HINT_RADIUS, HINT_SIGMA = 2.0, 0.5
# The fixture does real work (two 224 px scenes of 800 frames each, encoded, labelled and scored
# by every scorer): about 2 minutes on an idle 2-core machine. The default 300 s per test was
# exceeded on a machine also running a training job, so this module allows more.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def queries(tmp_path_factory):
    root = tmp_path_factory.mktemp("covis_quality")
    cfg = SimConfig(scene_preset="small", rig_preset="ring4", traversals=2, frames=100,
                    image_size=224, with_depth=True)
    pipeline = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"))
    model, _ = load_checkpoint(default_checkpoint("covisibility"),
                               expect_encoder=pipeline.backbone_id())
    embedding, _ = load_embedding(default_checkpoint("covisibility_embedding"),
                                  expect_encoder=pipeline.backbone_id())
    image, _ = load_image_embedding(default_checkpoint("covisibility_image_embedding"))
    verifier, verify = load_pair_verifier(default_checkpoint("covisibility_pair_verifier"))
    out = {name: [] for name in ("trues", "positions", *SCORERS)}
    for seed in HELD_OUT_SEEDS:
        for traversal in range(2):
            generate_trajectory(root, seed, traversal, cfg)
        scene = root / f"scene_{seed:05d}"
        frames = load_scene_frames(pipeline, scene, stride=2)
        images = scene_images(scene, frames)
        # The relocalize node's own window selection (WindowSelector), on traversal 0 as map.
        gmap, rows = scene_map(frames, images)
        selectors = sim_selectors(WINDOW, embedding, image, verifier, verify["top_k"],
                                  verify["weight"])
        for selector in selectors.values():
            selector.prepare(gmap)
        queries, scored = scored_window_queries(
            frames, WINDOW, {"decoder": decoder_scorer(model)},
            frame_scorers={name: selector_scorer(sel, frames, images, rows)
                           for name, sel in selectors.items() if name != "verified"})
        out["trues"] += queries.trues
        out["positions"] += queries.positions
        for name, preds in scored.items():
            out[name] += preds
        # The node's default: combined's best windows re-ranked by the pair verifier.
        for m, q in queries.frames:
            ranked = selector_ranking(selectors["verified"], frames, images, rows, m, q)
            out["verified"].append(ranked[0][0])
    return out


def _accuracy(queries, scorer, **hint):
    if scorer == "verified":
        return picked_window_accuracy(queries["trues"], queries["verified"], WINDOW)
    return window_selection_accuracy(queries["trues"], queries[scorer], WINDOW, **hint)


def test_every_scorer_holds_its_measured_level(queries):
    assert len(queries["trues"]) > 200
    results = {name: _accuracy(queries, name) for name in SCORERS}
    print(results)
    for name, result in results.items():
        assert result["within_tolerance"] >= MEASURED[name] - FLOOR, (name, result)


def test_the_default_beats_each_of_its_parts(queries):
    """The re-ranked default beats ``combined`` and each embedding alone. (``combined`` itself
    no longer beats the token embedding alone on these scenes since the compact_mnv2 encoder:
    0.917 against 0.922; it still beats the image embedding.)"""
    verified, combined = _accuracy(queries, "verified"), _accuracy(queries, "combined")
    assert verified["within_tolerance"] > combined["within_tolerance"]
    assert verified["mean_gap"] < combined["mean_gap"]
    for part in ("embedding", "image"):
        assert verified["within_tolerance"] > _accuracy(queries, part)["within_tolerance"], part
    assert combined["within_tolerance"] > _accuracy(queries, "image")["within_tolerance"]


def test_map_relative_scorers_beat_the_decoder_and_the_descriptor(queries):
    # Margin 0.15: the compact_mnv2 decoder (0.595) is much better than the compact one was
    # (0.269), and the image embedding (0.795) does not read tokens, so it did not move.
    for name in ("combined", "image", "embedding", "whitened"):
        ours = _accuracy(queries, name)
        for other in ("decoder", "descriptor"):
            theirs = _accuracy(queries, other)
            assert ours["within_tolerance"] >= theirs["within_tolerance"] + 0.15, (name, other)
            assert ours["mean_gap"] < theirs["mean_gap"]


def test_default_scorer_with_a_position_hint(queries):
    hints = noisy_hints(queries["positions"], HINT_SIGMA, np.random.default_rng(0))
    out = _accuracy(queries, "combined", hints=hints, radius=HINT_RADIUS)
    print(f"combined, {HINT_RADIUS} m hint (sigma {HINT_SIGMA} m): {out}")
    assert out["within_tolerance"] >= MEASURED["combined_hint"] - FLOOR


def test_window_selection_reaches_the_issue_goal(queries):
    """The node's default picks a window within 0.1 of the best in at least 90 % of these
    held-out queries (measured 0.938 with the compact_mnv2 token embedding)."""
    assert _accuracy(queries, "verified")["within_tolerance"] >= GOAL
