"""The image covisibility embedding: training, scoring, strict checkpoint loading, the asset."""

import numpy as np
import pytest
import torch

from g2g_model.covisibility.checkpoint import CheckpointError
from g2g_model.covisibility.image_embedding import (HEADER_KEY, ImageEmbedding, image_similarity,
                                                    load_image_embedding,
                                                    save_image_embedding, shrink,
                                                    train_image_embedding)
from g2g_model.assets import default_checkpoint
from g2g_model.tagged_safetensors import read_tagged, write_tagged
from place_images import place_image

SIZE = 32


def _scene(places, per_place, gen):
    labels = torch.tensor(places).repeat_interleave(per_place)
    images = torch.stack([shrink(place_image(int(p), gen), SIZE) for p in labels])
    overlap = (labels[:, None] == labels[None, :]).half()
    return {"images": images, "overlap": overlap}


@pytest.fixture(scope="module")
def trained():
    gen = torch.Generator().manual_seed(0)
    scenes = [_scene(range(s * 4, s * 4 + 4), 5, gen) for s in range(3)]
    return train_image_embedding(scenes, steps=150, batch_size=32, width=4, dim=16, lr=5e-3,
                                 progress=False)


def test_trained_model_tells_unseen_places_apart(trained):
    model, record = trained
    assert record["done_steps"] == 150 and record["scenes"] == 3 and record["frames"] == 60
    gen = torch.Generator().manual_seed(7)
    places = [100, 101, 102]  # never trained on
    images = [place_image(p, gen) for p in places for _ in range(3)]
    same = np.kron(np.eye(3), np.ones((3, 3))).astype(bool)

    def margin(m):
        scores = image_similarity(m, images, images)
        return scores[same].mean() - scores[~same].mean()
    torch.manual_seed(0)
    untrained = ImageEmbedding(SIZE, 4, 16).eval()
    print(f"same - different place: trained {margin(model):.3f}, "
          f"untrained {margin(untrained):.3f}")
    assert margin(model) > 0.15 and margin(model) > margin(untrained) + 0.1


def test_describe_accepts_any_image_size_and_refuses_non_rgb(trained):
    model, _ = trained
    desc = model.describe([np.zeros((30, 50, 3), np.uint8), np.full((64, 64, 3), 200, np.uint8)])
    assert desc.shape == (2, 16)
    assert torch.allclose(desc.norm(dim=1), torch.ones(2), atol=1e-5)
    assert model.describe([]).shape == (0, 16)
    with pytest.raises(ValueError, match="RGB uint8"):
        model.describe([np.zeros((32, 32), np.uint8)])
    with pytest.raises(ValueError, match="RGB uint8"):
        model.describe([np.zeros((32, 32, 3), np.float32)])


def test_checkpoint_round_trip(trained, tmp_path):
    model, record = trained
    path = save_image_embedding(tmp_path / "img.safetensors", model, record)
    loaded, header = load_image_embedding(path)
    assert header["training"]["done_steps"] == 150 and (header["size"], header["dim"]) == (32, 16)
    images = [place_image(3, torch.Generator().manual_seed(1)) for _ in range(2)]
    # Stored as float16: the descriptors move by ~1e-3, a second round trip not at all.
    assert torch.allclose(model.describe(images), loaded.describe(images), atol=5e-3)
    again, _ = load_image_embedding(save_image_embedding(tmp_path / "again.safetensors",
                                                         loaded, record))
    assert torch.equal(loaded.describe(images), again.describe(images))


def test_bad_checkpoints_are_refused_with_the_reason(trained, tmp_path):
    model, record = trained
    good = save_image_embedding(tmp_path / "good.safetensors", model, record)
    header, tensors = read_tagged(good, HEADER_KEY, 1, "image covisibility embedding",
                                  CheckpointError)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_image_embedding(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError):
        load_image_embedding(tmp_path / "junk.safetensors")
    cases = {
        "nan": (header, {**tensors, "head.bias": torch.full_like(tensors["head.bias"],
                                                                 float("nan"))}),
        "missing": (header, {k: v for k, v in tensors.items() if k != "head.weight"}),
        "shape": (dict(header, dim=8), tensors),
    }
    for name, (h, t) in cases.items():
        path = write_tagged(tmp_path / f"{name}.safetensors", HEADER_KEY, h, t)
        with pytest.raises(CheckpointError, match="does not fit its header"):
            load_image_embedding(path)
    path = write_tagged(tmp_path / "arch.safetensors", HEADER_KEY, dict(header, size=30), tensors)
    with pytest.raises(CheckpointError, match="bad header"):
        load_image_embedding(path)
    path = write_tagged(tmp_path / "version.safetensors", HEADER_KEY, dict(header, version=2),
                        tensors)
    with pytest.raises(CheckpointError, match="version"):
        load_image_embedding(path)


def test_training_refuses_scenes_without_covisible_pairs():
    scene = {"images": torch.zeros(4, 3, SIZE, SIZE, dtype=torch.uint8),
             "overlap": torch.zeros(4, 4)}
    with pytest.raises(ValueError, match="covisible"):
        train_image_embedding([scene], steps=1, progress=False)
    with pytest.raises(ValueError, match="no training scenes"):
        train_image_embedding([], steps=1, progress=False)


def test_shipped_image_embedding_is_small_and_loads():
    path = default_checkpoint("covisibility_image_embedding")
    assert path is not None, "the image covisibility embedding asset is not shipped"
    assert path.stat().st_size < 2 * 2**20
    model, header = load_image_embedding(path)
    assert isinstance(model, ImageEmbedding) and header["training"]["done_steps"] == \
        header["training"]["steps"]


def test_cli_trains_on_the_scenes_of_several_roots(tmp_path):
    """``g2g-covis train-image-embedding --root A B``: the scenes of both directories are the
    training data, and the record names both roots in the order given (real simulator scenes
    with depth, a few steps)."""
    from g2g_model.covisibility.cli import main
    from sim_fixtures import tiny_trajectories

    roots = [tmp_path / "a", tmp_path / "b"]
    for root, seed in zip(roots, (40000, 40001)):
        tiny_trajectories(root, seed, frames=6, traversals=2, rig="ring4", depth=True)
    out, data = tmp_path / "image.safetensors", tmp_path / "images.pt"
    assert main(["train-image-embedding", "--root", *map(str, roots), "--out", str(out),
                 "--data", str(data), "--steps", "2", "--batch-size", "4", "--size", "16",
                 "--width", "2", "--dim", "4", "--stride", "1", "-q"]) == 0
    _, header = load_image_embedding(out)
    assert header["training"]["scenes"] == 2 and header["training"]["frames"] == 2 * 2 * 4 * 6
    assert header["training"]["root"] == f"{roots[0]} {roots[1]}"
    assert [len(scene["images"]) for scene in torch.load(str(data))] == [48, 48]
