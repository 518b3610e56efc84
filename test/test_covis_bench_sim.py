"""Smoke test of the shipped-weight covisibility benchmarks on a tiny simulated map."""

from __future__ import annotations

import re

import pytest

from g2g_model.assets import default_checkpoint

pytestmark = pytest.mark.skipif(
    default_checkpoint("covisibility") is None or default_checkpoint("relocalization") is None,
    reason="needs the shipped covisibility and relocalization checkpoints")


def test_vs_g2g_and_end_to_end_run_on_a_tiny_map(tmp_path, capsys):
    from benchmarks.bench_covisibility import main

    assert main(["--only-shipped", "--cache-dir", str(tmp_path), "--vs-g2g",
                 "--small-frames", "10", "--rounds", "1", "--end-to-end", "--map-frames", "8",
                 "--query-start", "1", "--query-frames", "6", "--e2e-strides", "2"]) == 0
    out = capsys.readouterr().out
    # vs G2G: 10 map frames, W = 5 -> 6 candidate windows, 10 x 5 pairs.
    assert "6 candidate map windows" in out
    assert "| G2G, cached features | 6 passes of the G2G modules |" in out
    assert re.search(r"scalar scoring alone: [\d.]+ ms for 50 pairs = [\d,]+ pairs/s", out)
    # End to end: 8 frames x 4 cameras, 6 query frames; stride 2 scores fewer than all pairs.
    scored = re.search(r"pairs scored ([\d,]+) of 192", out)
    assert scored and 0 < int(scored.group(1).replace(",", "")) <= 192
    assert re.search(r"\*\*localize = encode query \+ score/select \+ G2G: [\d.]+ s\*\*; peak "
                     r"RSS at its end \d+ MiB", out)
    assert "| encode all frames |" in out
    assert re.search(r"true window overlap [\d.]+ \(best window in the map: [\d.]+\)", out)
    assert "encode all map frames + localize (covisibility decoder, coarse-to-fine, stride 2)" \
        in out
    # The node's default scorer (re-ranked and not), its two parts and map-whitened similarity
    # are measured in the same run; what they compute once per map is its own stage.
    assert "### localize, token + image covisibility embeddings, re-ranked by the pair " \
        "verifier (the relocalize node's default)" in out
    assert re.search(r"score [\d.]+, verification [\d.]+; true window overlap", out)
    assert "### localize, token + image covisibility embeddings (" in out
    assert "### localize, token covisibility embedding (" in out
    assert "### localize, image covisibility embedding (" in out
    assert "### localize, map-whitened similarity (" in out
    assert "| fit map whitening, describe map |" in out
    assert out.count("| load embedding(s), map statistics, decode and describe map |") == 4
    assert out.count("pairs scored 192 of 192") >= 5
    # Generated data and the map are cached for the next run.
    assert list(tmp_path.glob("*/scene_*/map_compact_*.g2gmap"))
