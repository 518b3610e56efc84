"""``bench_covisibility --end-to-end``: runs each :mod:`benchmarks.covis_end_to_end` case in a
fresh process (for its own peak RSS) and writes the report lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import List, Optional


def _run_case(args: List[str]) -> dict:
    """Run one :mod:`benchmarks.covis_end_to_end` case in a fresh interpreter; its record."""
    cmd = [sys.executable, "-m", "benchmarks.covis_end_to_end", *args]
    # Started through a forking shell: a process started straight from this one inherits this
    # one's resident size in ru_maxrss (the kernel keeps the pre-exec high-water mark, and
    # vfork/exec reports the parent's), so the child's peak would read this process's size.
    done = subprocess.run(["/bin/sh", "-c", '"$@"; exit $?', "sh", *cmd], capture_output=True,
                          text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _stage_table(record: dict) -> List[str]:
    lines = ["| stage | seconds | RSS after (MiB) | peak RSS so far (MiB) |", "|---|---|---|---|"]
    for r in record["stages"]:
        lines.append(f"| {r['stage']} | {r['seconds']:.3f} | {r['rss_mib']:.0f} | "
                     f"{r['peak_rss_mib']:.0f} |")
    return lines


def bench_end_to_end(frames: int, cache_dir, query_camera: str, query_start: int,
                     query_frames: int, window: int, coarse_strides: List[int],
                     batch_size: int, encode_batch: int,
                     threads: Optional[int] = None,
                     map_relative: bool = True) -> List[str]:
    """A ``query_frames``-frame query in the ``frames x cameras``-frame simulated map, shipped
    weights, map tokens precomputed; each case in a fresh process: the covisibility decoder at
    each coarse stride, then (``map_relative``) the token + image covisibility embeddings
    re-ranked by the pair verifier (the relocalize node's default) and not, each embedding
    alone, and map-whitened similarity. Returns the report lines."""
    from g2g_model.estimation.pipeline import G2GPipeline

    from benchmarks.sim_map import SimMapSpec, build_map, generate

    spec = SimMapSpec(frames=frames)
    t0 = time.perf_counter()
    scene, render_s = generate(spec, cache_dir)
    build_s = build_map(scene, G2GPipeline.default("relocalization"))[1]
    prep = time.perf_counter() - t0
    common = ["--scene", str(scene)] + (["--threads", str(threads)] if threads else [])
    out = [f"map: scene {spec.seed} ({spec.scene_preset}), traversal 0, rig {spec.rig_preset}, "
           f"{frames} frames per camera, {spec.image_size} px, under {scene} (preparation this "
           f"run: {prep:.1f} s" + (f", of which map build {build_s:.1f} s" if build_s else
                                   ", all reused") + ")"]
    localize_s = {}
    cases = [("covisibility", s) for s in coarse_strides]
    if map_relative:
        cases += [("verified", 1), ("combined", 1), ("embedding", 1), ("image", 1),
                  ("whitened", 1)]
    for scorer, stride in cases:
        load = os.getloadavg()[0]
        rec = _run_case(["--case", "localize", "--query-camera", query_camera,
                         "--query-start", str(query_start), "--query-frames",
                         str(query_frames), "--window", str(window), "--coarse-stride",
                         str(stride), "--batch-size", str(batch_size), "--scorer", scorer,
                         *common])
        if scorer == "verified":
            how = ("token + image covisibility embeddings, re-ranked by the pair verifier (the "
                   "relocalize node's default)")
        elif scorer == "combined":
            how = "token + image covisibility embeddings"
        elif scorer == "embedding":
            how = "token covisibility embedding"
        elif scorer == "image":
            how = "image covisibility embedding"
        elif scorer == "whitened":
            how = "map-whitened similarity"
        else:
            how = "covisibility decoder, " + (
                "full scoring" if stride == 1 else f"coarse-to-fine, stride {stride}")
        localize_s[how] = rec["localize_s"]
        ch, tw = rec["chosen"], rec["true_window_overlap"]
        score = next(r for r in rec["stages"] if r["stage"] == "score + select")
        out += ["", f"### localize, {how} (load average before: {load:.2f}, "
                f"{rec['torch_threads']} torch threads)", ""] + _stage_table(rec) + [
            "",
            f"query: {query_frames} frames of {query_camera}, traversal 1, frames "
            f"{rec['query']['frames'][0]}-{rec['query']['frames'][1]}; W = {window}; "
            f"pairs scored {score['pairs_scored']:,} of {score['pairs_full']:,}",
            f"**localize = encode query + score/select + G2G: {rec['localize_s']:.2f} s**; "
            f"peak RSS at its end {rec['peak_after_localize']['peak_rss_mib']:.0f} MiB "
            f"(RSS before loading anything {rec['stages'][0]['rss_mib']:.0f} MiB, after "
            f"{rec['peak_after_localize']['rss_mib']:.0f} MiB)",
            f"chosen: {ch['camera']} map frames {ch['map_frames'][0]}-{ch['map_frames'][1]}, "
            f"query frames {ch['query_frames'][0]}-{ch['query_frames'][1]}, score "
            f"{ch['score']:.3f}" + (f", verification {ch['verification']:.3f}"
                                    if ch.get("verification") is not None else "") +
            f"; true window overlap {tw['chosen']:.3f} (best window in the "
            f"map: {tw['best']:.3f}); selection alone {rec['selection_only_ms']:.1f} ms; G2G "
            f"error of query frame B0 in the map: {rec['query_b0_error']['translation_m']:.2f} "
            f"m, {rec['query_b0_error']['rotation_deg']:.1f} deg",
        ]
    load = os.getloadavg()[0]
    rec = _run_case(["--case", "encode-map", "--batch-size", str(encode_batch), *common])
    out += ["", f"### encode all map frames (load average before: {load:.2f}, batch "
            f"{encode_batch}, {rec['torch_threads']} torch threads)", ""] + _stage_table(rec) + [
        "", "tokens match the stored fp16 map features to "
        f"{rec['max_abs_diff_vs_stored_fp16']:.4f} (max abs difference)"]
    out += [""] + [
        f"**encode all map frames + localize ({how}): "
        f"{rec['encode_s']:.1f} + {v:.1f} = {rec['encode_s'] + v:.1f} s** (paper: ~9 s on an "
        "RTX 4090, including encoding all 3,030 frames)" for how, v in localize_s.items()]
    return out
