"""``g2g-covis``: train and evaluate the covisibility decoder from sample files.

Examples::

    g2g-covis synth --out /tmp/synth_train.safetensors --frames-per-place 24
    g2g-covis synth --out /tmp/synth_val.safetensors --frames-per-place 6 --seed 1
    g2g-covis train --train /tmp/synth_train.safetensors --val /tmp/synth_val.safetensors \\
        --preset tiny --train-preset smoke --out /tmp/covis_run
    g2g-covis train --train train.safetensors --val val.safetensors --out run \\
        --recipe decoder_default
    g2g-covis eval --checkpoint /tmp/covis_run/covisibility.safetensors \\
        --samples /tmp/synth_val.safetensors
    g2g-covis info --checkpoint /tmp/covis_run/covisibility.safetensors
    g2g-covis sim-samples --root data/sim_train --pipeline reloc.safetensors \\
        --out train.safetensors --preset cpu_fast --pairs-per-scene 6000
    g2g-covis sim-eval --root data/sim_test --pipeline reloc.safetensors \\
        --checkpoint covisibility.safetensors --json test.json

The window scorers' training commands (``train-embedding``, ``train-image-embedding``,
``train-pair-verifier``, ``finetune-pair-verifier``) are in :mod:`.cli_scorers`. Every
training command takes ``--recipe NAME``, the named settings of a ``tools/`` recipe
(:mod:`.recipes`); flags given with it override them.

Sample files are described in :mod:`g2g_model.covisibility.samples`. The decoder's ``in_dim``
and token grid are taken from the sample file (a square grid unless ``--grid H W`` is given).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import pathlib
import sys
from typing import List, Optional

from g2g_model.covisibility.checkpoint import load_checkpoint, read_checkpoint_meta
from g2g_model.covisibility.cli_scorers import add_scorer_commands
from g2g_model.covisibility.evaluate import evaluate
from g2g_model.covisibility.model import COVISIBILITY_PRESETS, build_covisibility_model
from g2g_model.covisibility.recipes import add_recipe_arg
from g2g_model.covisibility.samples import load_samples, save_samples
from g2g_model.covisibility.synthetic import synthetic_samples
from g2g_model.covisibility.train import TRAIN_PRESETS, train_covisibility


def _grid(num_patches: int, grid: Optional[List[int]]) -> tuple:
    if grid:
        if grid[0] * grid[1] != num_patches:
            raise ValueError(f"--grid {grid} has {grid[0] * grid[1]} cells, the tokens have "
                             f"{num_patches} patches")
        return tuple(grid)
    side = int(round(math.sqrt(num_patches)))
    if side * side != num_patches:
        raise ValueError(f"{num_patches} patches is not a square grid; pass --grid H W")
    return (side, side)


def train_settings(args, num_patches: int, in_dim: int) -> tuple:
    """The decoder overrides (``arch``) and :class:`TrainConfig` that ``train``'s arguments
    give for tokens of ``num_patches`` x ``in_dim``."""
    arch = {"in_dim": in_dim, "grid_hw": _grid(num_patches, args.grid)}
    if args.pool:
        arch["pool"] = args.pool
    if args.dense_subdiv:
        arch["dense_subdiv"] = args.dense_subdiv
    if args.input_norm:
        arch["input_norm"] = True
    overrides = {k: v for k, v in (("steps", args.steps), ("batch_size", args.batch_size),
                                   ("lr", args.lr), ("seed", args.seed),
                                   ("eval_every", args.eval_every)) if v is not None}
    if args.bf16:
        overrides["bf16"] = True
    config = dataclasses.replace(TRAIN_PRESETS[args.train_preset], **overrides)
    if args.scalar_loss:
        config = dataclasses.replace(
            config, loss=dataclasses.replace(config.loss, scalar_loss=args.scalar_loss))
    return arch, config


def _train(args) -> int:
    train_set = load_samples(args.train)
    val_set = load_samples(args.val, expect_encoder=train_set.encoder) if args.val else None
    _, p, d = train_set.frames.shape
    arch, config = train_settings(args, p, d)
    model = build_covisibility_model(args.preset, **arch)
    if args.input_norm and not (pathlib.Path(args.out) / "last.safetensors").exists():
        model.set_input_statistics(train_set.frames)
    print(f"covisibility decoder {args.preset!r}: {model.num_parameters():,} parameters, "
          f"{len(train_set)} training pairs, {config.steps} steps")
    result = train_covisibility(
        model, train_set, args.out, config, val_set=val_set, preset=args.preset,
        resume=not args.no_resume, progress=not args.quiet,
    )
    print(json.dumps(result, indent=2))
    return 0


def _report(metrics: dict, json_path) -> None:
    """Print ``metrics`` as JSON; also write them to ``json_path`` when given."""
    text = json.dumps(metrics, indent=2)
    print(text)
    if json_path:
        with open(json_path, "w") as fh:
            fh.write(text + "\n")


def _eval(args) -> int:
    meta = read_checkpoint_meta(args.checkpoint)
    samples = load_samples(args.samples, expect_encoder=meta.get("encoder") or None)
    model, _ = load_checkpoint(args.checkpoint)
    metrics = evaluate(model, samples, batch_size=args.batch_size, bf16=args.bf16)
    _report(metrics, args.json)
    return 0


def _synth(args) -> int:
    samples = synthetic_samples(num_places=args.places, frames_per_place=args.frames_per_place,
                                grid_hw=tuple(args.grid), dim=args.dim, seed=args.seed,
                                code_seed=args.code_seed)
    path = save_samples(samples, args.out)
    print(f"wrote {len(samples)} pairs over {samples.frames.shape[0]} frames to {path}")
    return 0


def _sim_pipeline(path):
    from g2g_model.estimation.pipeline import G2GPipeline

    return G2GPipeline.from_checkpoint(path) if path else G2GPipeline.default()


def _sim_samples(args) -> int:
    from g2g_model.covisibility.model import covisibility_config
    from g2g_model.covisibility.sim_data import build_sim_samples, scene_dirs

    pipeline = _sim_pipeline(args.pipeline)
    scenes = scene_dirs(args.root, args.scenes)
    dense_hw = covisibility_config(args.preset, **_sim_arch(pipeline, args)).dense_hw
    samples = build_sim_samples(pipeline, scenes, args.pairs_per_scene, dense_hw,
                                stride=args.stride, seed=args.seed, cache_dir=args.cache)
    path = save_samples(samples, args.out)
    print(f"wrote {len(samples)} pairs over {samples.frames.shape[0]} frames of "
          f"{len(scenes)} scenes (encoder {samples.encoder}) to {path}")
    return 0


def _sim_arch(pipeline, args) -> dict:
    """Decoder overrides that fit the pipeline's tokens: in_dim, grid, pool, dense subdiv."""
    grid = tuple(s // pipeline.backbone.config_dict()["patch_size"] for s in pipeline.image_size)
    return {"in_dim": pipeline.backbone.feature_dim, "grid_hw": grid, "pool": args.pool,
            "dense_subdiv": args.dense_subdiv}


def _sim_eval(args) -> int:
    from g2g_model.covisibility.sim_data import scene_dirs
    from g2g_model.covisibility.sim_eval import evaluate_scenes

    pipeline = _sim_pipeline(args.pipeline)
    model, meta = load_checkpoint(args.checkpoint, expect_encoder=pipeline.backbone_id())
    embedding = None
    if args.embedding:
        from g2g_model.covisibility.embedding import load_embedding

        embedding = load_embedding(args.embedding, expect_encoder=pipeline.backbone_id())[0]
    image_embedding = None
    if args.image_embedding:
        from g2g_model.covisibility.image_embedding import load_image_embedding

        image_embedding = load_image_embedding(args.image_embedding)[0]
    verifier, verify = None, {}
    if args.pair_verifier:
        from g2g_model.covisibility.pair_verifier import load_pair_verifier

        verifier, header = load_pair_verifier(args.pair_verifier)
        verify = {"verify_top_k": header["top_k"], "verify_weight": header["weight"]}
    metrics = evaluate_scenes(model, pipeline, scene_dirs(args.root, args.scenes),
                              model.config.dense_hw, stride=args.stride,
                              pairs_per_scene=args.pairs_per_scene, window=args.window,
                              cache_dir=args.cache, hint_radius=args.hint_radius,
                              hint_sigma=args.hint_sigma, embedding=embedding,
                              image_embedding=image_embedding, pair_verifier=verifier,
                              **verify)
    metrics["checkpoint"] = str(args.checkpoint)
    metrics["encoder"] = pipeline.backbone_id()
    _report(metrics, args.json)
    return 0


def _info(args) -> int:
    meta = read_checkpoint_meta(args.checkpoint)
    meta.pop("optimizer", None)
    print(json.dumps(meta, indent=2))
    return 0


def build_parser(recipe: Optional[str] = None) -> argparse.ArgumentParser:
    """The ``g2g-covis`` parser; with ``recipe`` (a name in :data:`.recipes.RECIPES`) its
    command's defaults are that recipe's values."""
    parser = argparse.ArgumentParser(prog="g2g-covis", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    tr = sub.add_parser("train", help="train a decoder on a sample file")
    tr.add_argument("--train", required=True, help="training sample file (.safetensors)")
    tr.add_argument("--val", help="held-out sample file")
    tr.add_argument("--out", required=True, help="output directory (log, checkpoints)")
    tr.add_argument("--preset", default="compact", choices=sorted(COVISIBILITY_PRESETS))
    tr.add_argument("--train-preset", default="default", choices=sorted(TRAIN_PRESETS))
    tr.add_argument("--grid", type=int, nargs=2, metavar=("H", "W"),
                    help="token grid when P is not square")
    tr.add_argument("--pool", type=int, help="override the preset's token pooling factor")
    tr.add_argument("--dense-subdiv", type=int, help="override the dense head subdivision")
    tr.add_argument("--input-norm", action="store_true",
                    help="standardise tokens with statistics of the training frames")
    tr.add_argument("--scalar-loss", choices=("l1", "mse"),
                    help="override the scalar (ratio) loss of the train preset")
    tr.add_argument("--steps", type=int)
    tr.add_argument("--batch-size", type=int)
    tr.add_argument("--lr", type=float)
    tr.add_argument("--seed", type=int)
    tr.add_argument("--eval-every", type=int)
    tr.add_argument("--bf16", action="store_true", help="bf16 autocast")
    tr.add_argument("--no-resume", action="store_true", help="ignore out/last.safetensors")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.set_defaults(func=_train)
    add_recipe_arg(tr, "train", recipe)

    ev = sub.add_parser("eval", help="held-out metrics of a checkpoint")
    ev.add_argument("--checkpoint", required=True)
    ev.add_argument("--samples", required=True)
    ev.add_argument("--batch-size", type=int, default=256)
    ev.add_argument("--bf16", action="store_true")
    ev.add_argument("--json", help="also write the metrics to this file")
    ev.set_defaults(func=_eval)

    add_scorer_commands(sub, recipe)

    sy = sub.add_parser("synth", help="write a synthetic sample file (sanity checks)")
    sy.add_argument("--out", required=True)
    sy.add_argument("--places", type=int, default=16)
    sy.add_argument("--frames-per-place", type=int, default=24)
    sy.add_argument("--grid", type=int, nargs=2, default=[4, 4], metavar=("H", "W"))
    sy.add_argument("--dim", type=int, default=32)
    sy.add_argument("--seed", type=int, default=0)
    sy.add_argument("--code-seed", type=int, default=0)
    sy.set_defaults(func=_synth)

    for name, helptext in (("sim-samples", "labelled pairs of sim scenes (tokens of a pipeline)"),
                           ("sim-eval", "held-out metrics of a checkpoint on sim scenes")):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("--root", required=True, help="directory of sim scene_* folders")
        sp.add_argument("--pipeline", help="G2G checkpoint whose backbone encodes the frames "
                        "(default: the embedded relocalization default)")
        sp.add_argument("--scenes", type=int, help="use only the first N scenes")
        sp.add_argument("--stride", type=int, default=2, help="frame subsampling")
        sp.add_argument("--pairs-per-scene", type=int, default=2000)
        sp.add_argument("--cache", help="token cache directory")
        if name == "sim-samples":
            sp.add_argument("--out", required=True, help="sample file to write")
            sp.add_argument("--preset", default="cpu_fast", choices=sorted(COVISIBILITY_PRESETS))
            sp.add_argument("--pool", type=int, default=1,
                            help="decoder token pooling (must divide the token grid)")
            sp.add_argument("--dense-subdiv", type=int, default=2)
            sp.add_argument("--seed", type=int, default=0)
            sp.set_defaults(func=_sim_samples)
        else:
            sp.add_argument("--checkpoint", required=True)
            sp.add_argument("--window", type=int, default=4, help="window-selection W")
            sp.add_argument("--hint-radius", type=float,
                            help="also report window selection restricted to map windows "
                                 "within this many metres of a position hint")
            sp.add_argument("--embedding",
                            help="also score with this covisibility embedding file")
            sp.add_argument("--image-embedding",
                            help="also score with this image covisibility embedding file "
                                 "(and, with --embedding, with their mean)")
            sp.add_argument("--pair-verifier",
                            help="with --embedding and --image-embedding, also re-rank the "
                                 "combined scorer's best windows with this pair verifier file "
                                 "(its stored top_k and weight)")
            sp.add_argument("--hint-sigma", type=float, default=0.0,
                            help="noise of the position hint (m per axis, Gaussian)")
            sp.add_argument("--json", help="also write the metrics to this file")
            sp.set_defaults(func=_sim_eval)

    info = sub.add_parser("info", help="print a checkpoint's metadata")
    info.add_argument("--checkpoint", required=True)
    info.set_defaults(func=_info)
    return parser


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse ``argv``; with ``--recipe NAME`` parse again with that recipe's values as the
    defaults, so that flags given with it override the recipe."""
    args = build_parser().parse_args(argv)
    if getattr(args, "recipe", None):
        args = build_parser(args.recipe).parse_args(argv)
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except ValueError as exc:  # boundary errors (files, configs) are user errors, not crashes
        print(f"g2g-covis: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
