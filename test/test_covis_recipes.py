"""The named covisibility recipes (``g2g-covis <command> --recipe NAME``) resolve to exactly the
settings that tools/*.sh passed as flags before they had names, and flags still override them.
Nothing is trained: both argument lists go through the CLI's own parsing and resolution."""

import pytest

from g2g_model.covisibility import cli
from g2g_model.covisibility.model import covisibility_config
from g2g_model.covisibility.recipes import RECIPES, recipe_names

# name -> (the paths and run options a script still passes, the flags the recipe replaced);
# the flags are copied from the scripts as they were before the recipes.
PATHS = {
    "train": ["train", "--train", "t.safetensors", "--val", "v.safetensors", "--out", "run",
              "--quiet"],
    "train-embedding": ["train-embedding", "--train", "t.safetensors", "--out", "e.safetensors",
                        "--quiet"],
    "train-image-embedding": ["train-image-embedding", "--root", "data/sim_train",
                              "--workers", "2", "--data", "i.pt", "--out", "ie.safetensors"],
    "train-pair-verifier": ["train-pair-verifier", "--root", "data/sim_train",
                            "data/sim_train_more", "--workers", "2", "--data", "i.pt",
                            "--out", "pv.safetensors"],
    "finetune-pair-verifier": ["finetune-pair-verifier", "--root", "data/sim_train",
                               "data/sim_train_more", "--workers", "2", "--data", "i.pt",
                               "--init", "init.safetensors", "--image-embedding",
                               "ie.safetensors", "--out", "pv.safetensors"],
}
OLD_FLAGS = {
    "decoder_default": ["--preset", "cpu_fast", "--pool", "1", "--dense-subdiv", "2",
                        "--input-norm", "--train-preset", "cpu_short", "--scalar-loss", "mse",
                        "--lr", "5e-4", "--steps", "3000", "--batch-size", "64"],
    "embedding_default": [],
    "image_embedding_default": [],
    "pair_verifier_cpu": ["--steps", "4000", "--batch-size", "128", "--weight", "0.5"],
    "pair_verifier_gpu": ["--steps", "8500", "--batch-size", "256", "--device", "cuda"],
    "pair_verifier_finetune": ["--weight", "5"],
}


def _settings(argv, resolve=True):
    """Every argument value, plus for ``train`` the resolved decoder and TrainConfig."""
    args = cli.parse_args(argv)
    values = {k: v for k, v in vars(args).items() if k != "recipe"}
    if resolve and args.command == "train":
        arch, config = cli.train_settings(args, num_patches=49, in_dim=192)
        values["arch"] = arch
        values["model_config"] = covisibility_config(args.preset, **arch)
        values["train_config"] = config
    return values


def test_every_recipe_is_covered():
    assert set(OLD_FLAGS) == set(RECIPES)
    assert set(r.command for r in RECIPES.values()) <= set(PATHS)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_resolves_as_the_old_flags(name):
    paths = PATHS[RECIPES[name].command]
    old = _settings(paths + OLD_FLAGS[name])
    new = _settings(paths + ["--recipe", name])
    assert new == old
    # every recipe value is an argument of its command (a typo would only add an attribute)
    plain = _settings(paths, resolve=False)
    assert set(RECIPES[name].values) <= set(plain)
    # and not the defaults by accident, where the recipe has values
    if RECIPES[name].values:
        assert _settings(paths + ["--recipe", name], resolve=False) != plain


def test_decoder_recipe_settings():
    s = _settings(PATHS["train"] + ["--recipe", "decoder_default"])
    assert s["arch"] == {"in_dim": 192, "grid_hw": (7, 7), "pool": 1, "dense_subdiv": 2,
                         "input_norm": True}
    assert (s["train_config"].steps, s["train_config"].batch_size, s["train_config"].lr) == (
        3000, 64, 5e-4)
    assert s["train_config"].loss.scalar_loss == "mse"


def test_flags_override_the_recipe():
    s = _settings(PATHS["train"] + ["--recipe", "decoder_default", "--steps", "10",
                                    "--batch-size", "8", "--preset", "tiny"])
    assert (s["train_config"].steps, s["train_config"].batch_size) == (10, 8)
    assert s["preset"] == "tiny" and s["train_config"].lr == 5e-4  # the rest stays
    s = _settings(PATHS["train-pair-verifier"]
                  + ["--steps", "50", "--recipe", "pair_verifier_gpu", "--device", "cpu"])
    assert (s["steps"], s["batch_size"], s["device"]) == (50, 256, "cpu")
    s = _settings(PATHS["finetune-pair-verifier"] + ["--recipe", "pair_verifier_finetune",
                                                     "--weight", "2"])
    assert s["weight"] == 2.0


def test_recipe_of_another_command_is_refused():
    assert recipe_names("train") == ["decoder_default"]
    with pytest.raises(SystemExit):
        cli.parse_args(PATHS["train"] + ["--recipe", "pair_verifier_cpu"])
