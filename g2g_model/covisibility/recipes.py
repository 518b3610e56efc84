"""Named training recipes of the covisibility models: ``g2g-covis <command> --recipe NAME``.

A recipe is the set of argument values that one of ``tools/train_covis_*.sh`` /
``tools/finetune_covis_pair_verifier.sh`` used to pass as flags; the script now passes the name
and its paths. ``--recipe`` replaces the subcommand's defaults, so a flag given with it still
wins (``--recipe decoder_default --steps 100``). Values are argparse destinations of the
subcommand (``batch_size`` for ``--batch-size``); a recipe without values is the subcommand's
defaults, named so that a script does not depend on them by accident.
"""

from __future__ import annotations

import argparse
from typing import Dict, List, NamedTuple, Optional


class Recipe(NamedTuple):
    command: str  # the g2g-covis subcommand that runs it
    values: Dict[str, object]  # argparse destination -> value
    help: str


RECIPES: Dict[str, Recipe] = {
    "decoder_default": Recipe(
        "train",
        {"preset": "cpu_fast", "pool": 1, "dense_subdiv": 2, "input_norm": True,
         "train_preset": "cpu_short", "scalar_loss": "mse", "lr": 5e-4, "steps": 3000,
         "batch_size": 64},
        "the shipped decoder covis_mnv2 (tools/train_covis_default.sh): cpu_fast over the "
        "backbone's token grid, pool 1, dense subdiv 2, input norm; cpu_short, MSE ratios, "
        "lr 5e-4, 3000 steps of 64"),
    "embedding_default": Recipe(
        "train-embedding", {},
        "the shipped token embedding (tools/train_covis_embedding.sh): the defaults"),
    "image_embedding_default": Recipe(
        "train-image-embedding", {},
        "the shipped image embedding (tools/train_covis_image_embedding.sh): the defaults"),
    "pair_verifier_cpu": Recipe(
        "train-pair-verifier", {"steps": 4000, "batch_size": 128, "weight": 0.5},
        "the CPU pair verifier (tools/train_covis_pair_verifier.sh): 4000 steps of 128, "
        "re-ranking weight 0.5"),
    "pair_verifier_gpu": Recipe(
        "train-pair-verifier", {"steps": 8500, "batch_size": 256, "device": "cuda"},
        "step 1 of the shipped pair verifier (tools/train_covis_pair_verifier_gpu.sh): "
        "8500 steps of 256 on cuda"),
    "pair_verifier_finetune": Recipe(
        "finetune-pair-verifier", {"weight": 5.0},
        "step 2 of the shipped pair verifier (tools/finetune_covis_pair_verifier.sh): the "
        "fine-tune defaults, stored re-ranking weight 5"),
}


def recipe_names(command: str) -> List[str]:
    """The recipes that ``command`` runs."""
    return sorted(name for name, r in RECIPES.items() if r.command == command)


def add_recipe_arg(sp: argparse.ArgumentParser, command: str,
                   recipe: Optional[str] = None) -> None:
    """Add ``--recipe`` to ``command``'s parser; when ``recipe`` is one of its recipes, make
    that recipe's values the parser's defaults (explicit flags still override them)."""
    names = recipe_names(command)
    sp.add_argument("--recipe", choices=names,
                    help="named settings (flags given too override them): " + "; ".join(
                        f"{n}: {RECIPES[n].help}" for n in names))
    if recipe in names:
        sp.set_defaults(**RECIPES[recipe].values)
