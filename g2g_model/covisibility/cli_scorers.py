"""``g2g-covis`` subcommands that train the map window scorers: ``train-embedding`` (token
embedding), ``train-image-embedding``, ``train-pair-verifier`` and ``finetune-pair-verifier``.

Each command parses its arguments and calls the library: :mod:`g2g_model.covisibility.embedding`,
:mod:`~g2g_model.covisibility.image_embedding`, :mod:`~g2g_model.covisibility.pair_verifier`;
the image models' training data come from
:func:`g2g_model.covisibility.sim_data.image_training_data`.
"""

from __future__ import annotations

import argparse
import pathlib
from typing import Optional

from g2g_model.covisibility.embedding import EMBEDDING_DEFAULTS
from g2g_model.covisibility.image_embedding import IMAGE_EMBEDDING_DEFAULTS
from g2g_model.covisibility.pair_verifier import FINETUNE_DEFAULTS, PAIR_VERIFIER_DEFAULTS
from g2g_model.covisibility.recipes import add_recipe_arg
from g2g_model.covisibility.samples import load_samples
from g2g_model.covisibility.sim_data import image_training_data


def _train_embedding(args) -> int:
    from g2g_model.covisibility.embedding import save_embedding, train_embedding

    samples = load_samples(args.train)
    model, record = train_embedding(samples, dim=args.dim, pca_dims=args.pca_dims,
                                    steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                                    seed=args.seed, progress=not args.quiet)
    record["train"] = str(args.train)
    path = save_embedding(args.out, model, samples.encoder, record)
    print(f"wrote {path}: {record}")
    return 0


def _scene_image_data(args) -> list:
    """The shrunk training images of ``args.root``'s scenes (kept in ``args.data``)."""
    return image_training_data(args.root, args.scenes, args.stride, args.size, args.workers,
                               args.data, progress=not args.quiet)


def _state_path(args) -> pathlib.Path:
    """``<out>.state.pt``: the resumable training state (removed once a run completes);
    ``--no-resume`` removes an old one first."""
    path = pathlib.Path(str(args.out) + ".state.pt")
    if args.no_resume and path.is_file():
        path.unlink()
        print(f"removed the training state {path} (--no-resume)")
    elif path.is_file():
        print(f"resuming from the training state {path}")
    return path


def _train_image_embedding(args) -> int:
    from g2g_model.covisibility.image_embedding import (
        save_image_embedding, train_image_embedding,
    )

    data = _scene_image_data(args)
    model, record = train_image_embedding(data, steps=args.steps, batch_size=args.batch_size,
                                          width=args.width, dim=args.dim, lr=args.lr,
                                          seed=args.seed, progress=not args.quiet,
                                          checkpoint=args.out, state_path=_state_path(args))
    record.update(root=" ".join(map(str, args.root)), stride=args.stride)
    path = save_image_embedding(args.out, model, record)
    print(f"wrote {path}: {record}")
    return 0


def _train_pair_verifier(args) -> int:
    from g2g_model.covisibility.pair_verifier import save_pair_verifier, train_pair_verifier

    data = _scene_image_data(args)
    if data and int(data[0]["images"].shape[-1]) != args.size:
        raise ValueError(f"{args.data} holds {int(data[0]['images'].shape[-1])} px images, "
                         f"--size is {args.size}")
    extra = {"root": " ".join(map(str, args.root)), "stride": args.stride}

    def save(model, record):
        return save_pair_verifier(args.out, model, dict(record, **extra), top_k=args.top_k,
                                  weight=args.weight)

    model, record = train_pair_verifier(data, steps=args.steps, batch_size=args.batch_size,
                                        width=args.width, hidden=args.hidden, lr=args.lr,
                                        seed=args.seed, progress=not args.quiet, save=save,
                                        state_path=_state_path(args), device=args.device)
    print(f"wrote {args.out}: {dict(record, **extra)}")
    return 0


def _finetune_pair_verifier(args) -> int:
    from g2g_model.covisibility.image_embedding import load_image_embedding
    from g2g_model.covisibility.pair_verifier import (finetune_pair_verifier, load_pair_verifier,
                                                      save_pair_verifier)
    from g2g_model.model.checkpoint import sha256_of

    model, header = load_pair_verifier(args.init)
    embedding = load_image_embedding(args.image_embedding)[0]
    args.size = model.size
    data = _scene_image_data(args)
    if data and int(data[0]["images"].shape[-1]) != model.size:
        raise ValueError(f"{args.data} holds {int(data[0]['images'].shape[-1])} px images, "
                         f"the verifier {args.init} takes {model.size} px")
    top_k = header["top_k"] if args.top_k is None else args.top_k
    weight = header["weight"] if args.weight is None else args.weight
    extra = {"root": " ".join(map(str, args.root)), "stride": args.stride,
             "init": str(args.init), "image_embedding": str(args.image_embedding),
             "base": header["training"]}

    def save(model, record):
        return save_pair_verifier(args.out, model, {"finetune": dict(record, **extra)},
                                  top_k=top_k, weight=weight)

    model, record = finetune_pair_verifier(
        model, data, embedding, steps=args.steps, lr=args.lr, pairs=args.pairs,
        triplets=args.triplets, rank_weight=args.rank_weight, neighbours=args.neighbours,
        seed=args.seed, progress=not args.quiet, save=save, state_path=_state_path(args),
        device=args.device, init_sha256=sha256_of(args.init))
    print(f"wrote {args.out}: {record}")
    return 0


def _image_data_args(sp: argparse.ArgumentParser, what: str, defaults: Optional[dict]
                     ) -> None:
    """Arguments of the models trained on shrunk scene images (where the images come from)."""
    sp.add_argument("--root", required=True, nargs="+",
                    help="directories of sim scene_* folders (their scenes, in this order)")
    sp.add_argument("--out", required=True, help=f"{what} file to write")
    sp.add_argument("--scenes", type=int, help="use only the first N scenes")
    sp.add_argument("--stride", type=int, default=2, help="frame subsampling")
    sp.add_argument("--workers", type=int, default=1,
                    help="processes that read the scenes (one scene each)")
    sp.add_argument("--data", help="keep the shrunk images and overlaps in this file (reused "
                    "when it exists)")
    if defaults is not None:  # a model trained from scratch (a fine-tune keeps its own)
        sp.add_argument("--size", type=int, default=defaults["size"])
        sp.add_argument("--width", type=int, default=defaults["width"])
    sp.add_argument("--no-resume", action="store_true",
                    help="start afresh: remove the training state OUT.state.pt of an "
                         "interrupted run (otherwise the run continues from it)")


def _schedule_args(sp: argparse.ArgumentParser, defaults: dict) -> None:
    """``--steps``, ``--batch-size`` and ``--lr`` of a model trained from scratch on scene
    images, with that model's defaults."""
    sp.add_argument("--steps", type=int, default=defaults["steps"])
    sp.add_argument("--batch-size", type=int, default=defaults["batch_size"])
    sp.add_argument("--lr", type=float, default=defaults["lr"])


def add_scorer_commands(sub, recipe: Optional[str] = None) -> None:
    """Add the scorer training subcommands to ``g2g-covis``'s subparsers (``recipe``: as
    :func:`g2g_model.covisibility.cli.build_parser`'s)."""
    te = sub.add_parser("train-embedding",
                        help="train the covisibility embedding (per-frame descriptors) on a "
                             "sample file")
    te.add_argument("--train", required=True, help="training sample file (.safetensors)")
    te.add_argument("--out", required=True, help="embedding file to write")
    te.add_argument("--dim", type=int, default=EMBEDDING_DEFAULTS["dim"])
    te.add_argument("--pca-dims", type=int, default=EMBEDDING_DEFAULTS["pca_dims"])
    te.add_argument("--steps", type=int, default=EMBEDDING_DEFAULTS["steps"])
    te.add_argument("--batch-size", type=int, default=512)
    te.add_argument("--lr", type=float, default=1e-3)
    te.add_argument("--seed", type=int, default=0)
    te.add_argument("--quiet", action="store_true", help="no progress bar")
    te.set_defaults(func=_train_embedding)
    add_recipe_arg(te, "train-embedding", recipe)

    ti = sub.add_parser("train-image-embedding",
                        help="train the image covisibility embedding (a small CNN on the "
                             "frames' pixels) on sim scenes")
    _image_data_args(ti, "image embedding", IMAGE_EMBEDDING_DEFAULTS)
    ti.add_argument("--dim", type=int, default=IMAGE_EMBEDDING_DEFAULTS["dim"])
    _schedule_args(ti, IMAGE_EMBEDDING_DEFAULTS)
    ti.add_argument("--seed", type=int, default=0)
    ti.add_argument("-q", "--quiet", action="store_true")
    ti.set_defaults(func=_train_image_embedding)
    add_recipe_arg(ti, "train-image-embedding", recipe)

    tv = sub.add_parser("train-pair-verifier",
                        help="train the pair verifier (a small CNN that re-ranks the window "
                             "scorer's best map windows) on sim scenes")
    _image_data_args(tv, "pair verifier", PAIR_VERIFIER_DEFAULTS)
    tv.add_argument("--hidden", type=int, default=PAIR_VERIFIER_DEFAULTS["hidden"])
    _schedule_args(tv, PAIR_VERIFIER_DEFAULTS)
    tv.add_argument("--top-k", type=int, default=PAIR_VERIFIER_DEFAULTS["top_k"],
                    help="candidate windows to verify (stored in the file: the node's default)")
    tv.add_argument("--weight", type=float, default=PAIR_VERIFIER_DEFAULTS["weight"],
                    help="weight of the verification in the re-ranking (stored in the file)")
    tv.add_argument("--device", default="cpu", help="torch device to train on (cpu, cuda)")
    tv.add_argument("--seed", type=int, default=0)
    tv.add_argument("-q", "--quiet", action="store_true")
    tv.set_defaults(func=_train_pair_verifier)
    add_recipe_arg(tv, "train-pair-verifier", recipe)

    tf = sub.add_parser("finetune-pair-verifier",
                        help="fine-tune a pair verifier on the confusable pairs it must order "
                             "(hard examples mined with the image embedding)")
    _image_data_args(tf, "fine-tuned pair verifier", None)
    tf.add_argument("--init", required=True, help="the trained pair verifier to start from")
    tf.add_argument("--image-embedding", required=True,
                    help="image embedding file that finds each frame's confusable frames")
    for name, what in (("steps", "training steps"),
                       ("pairs", "binned pairs per step (as train-pair-verifier draws them)"),
                       ("triplets", "look-alike triplets per step"),
                       ("neighbours", "most similar frames per frame that triplets come from")):
        tf.add_argument(f"--{name}", type=int, default=FINETUNE_DEFAULTS[name],
                        help=f"{what} (default %(default)s)")
    tf.add_argument("--lr", type=float, default=FINETUNE_DEFAULTS["lr"])
    tf.add_argument("--rank-weight", type=float, default=FINETUNE_DEFAULTS["rank_weight"],
                    help="weight of the ranking term (margin: half the true overlap gap)")
    tf.add_argument("--top-k", type=int, help="stored re-ranking candidates (default: --init's)")
    tf.add_argument("--weight", type=float,
                    help="stored re-ranking weight (default: --init's)")
    tf.add_argument("--device", default="cpu", help="torch device to train on (cpu, cuda)")
    tf.add_argument("--seed", type=int, default=0)
    tf.add_argument("-q", "--quiet", action="store_true")
    tf.set_defaults(func=_finetune_pair_verifier)
    add_recipe_arg(tf, "finetune-pair-verifier", recipe)
