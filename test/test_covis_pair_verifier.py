"""The pair verifier: training, symmetric scores, window re-ranking, strict checkpoints, the
asset and its CLI."""

import numpy as np
import pytest
import torch

from g2g_model.covisibility.checkpoint import CheckpointError
from g2g_model.covisibility.image_embedding import shrink
from g2g_model.covisibility.image_embedding import ImageEmbedding
from g2g_model.covisibility.pair_verifier import (HEADER_KEY, PairVerifier, candidate_windows,
                                                  confusable_frames, finetune_pair_verifier,
                                                  load_pair_verifier, save_pair_verifier,
                                                  train_pair_verifier, verify_windows)
from g2g_model.assets import default_checkpoint
from g2g_model.tagged_safetensors import read_tagged, write_tagged
from place_images import place_image

SIZE = 32


def _scene(places, per_place, gen):
    """Frames of a few places, alternately from two traversals; overlap 0.8 within a place."""
    labels = torch.tensor(places).repeat_interleave(per_place)
    images = torch.stack([shrink(place_image(int(p), gen), SIZE) for p in labels])
    overlap = 0.8 * (labels[:, None] == labels[None, :]).half()
    return {"images": images, "overlap": overlap, "traversal": torch.arange(len(labels)) % 2}


@pytest.fixture(scope="module")
def trained():
    gen = torch.Generator().manual_seed(0)
    scenes = [_scene(range(s * 4, s * 4 + 4), 6, gen) for s in range(3)]
    return train_pair_verifier(scenes, steps=150, batch_size=40, width=4, hidden=16, lr=5e-3,
                               progress=False)


def _shrunk(places, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.stack([shrink(place_image(p, gen), SIZE) for p in places])


def test_trained_verifier_tells_unseen_places_apart_symmetrically(trained):
    model, record = trained
    assert record["done_steps"] == 150 and record["scenes"] == 3 and record["frames"] == 72
    a = _shrunk([100, 101, 102, 100, 101, 102], 7)  # never trained on
    b = _shrunk([100, 101, 102, 101, 102, 100], 8)
    scores = model.symmetric(a, b)
    assert torch.allclose(scores, model.symmetric(b, a))
    assert torch.all((scores >= 0) & (scores <= 1))
    torch.manual_seed(0)
    untrained = PairVerifier(SIZE, 4, 16).eval()
    margin = scores[:3].mean() - scores[3:].mean()
    base = untrained.symmetric(a, b)
    print(f"same - different place: trained {margin:.3f}, untrained "
          f"{base[:3].mean() - base[3:].mean():.3f}")
    assert margin > 0.3


def test_candidates_are_distinct_places_best_first():
    scores = np.zeros((12, 2))
    scores[[2, 3, 4]] = 1.0      # windows starting at 1-4 cover these rows
    scores[9] = 0.5
    windows = [np.arange(i, i + 4) for i in range(9)]
    cands = candidate_windows(scores, windows, top_k=3)
    starts = [int(windows[i][0]) for i, _ in cands]
    # Windows 1-4 tie; the first is kept, those sharing more than 2 of its frames are skipped.
    assert starts[0] == 1 and all(abs(s - 1) >= 2 for s in starts[1:])
    assert [c[1] for c in cands] == sorted((c[1] for c in cands), reverse=True)
    allowed = np.zeros(9, bool)
    allowed[6:] = True
    assert {int(windows[i][0]) for i, _ in candidate_windows(scores, windows, 5, allowed)} \
        <= {6, 7, 8}
    with pytest.raises(ValueError, match="top_k"):
        candidate_windows(scores, windows, 0)


def test_verification_re_ranks_the_candidates(trained):
    """The scorer prefers a window of the wrong place by a small margin; the verifier, which
    sees that the query's images are of another place, moves the right window first."""
    model, _ = trained
    places = [110] * 4 + [111] * 4 + [112] * 4   # three map places, 4 frames each
    map_images = _shrunk(places, 1)
    query_images = _shrunk([112] * 3, 2)
    windows = [np.arange(i, i + 4) for i in (0, 4, 8)]
    scores = np.zeros((12, 3))
    scores[4:8] = 0.55   # the scorer: place 111
    scores[8:12] = 0.50  # the truth: place 112
    kept = verify_windows(model, scores, windows, map_images, query_images, 3, weight=0.0)
    assert [i for i, _, _ in kept] == [1, 2, 0]
    ranked = verify_windows(model, scores, windows, map_images, query_images, 3, weight=1.0)
    assert ranked[0][0] == 2 and ranked[0][2] > ranked[1][2] + 0.2
    assert ranked[0][1] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="weight"):
        verify_windows(model, scores, windows, map_images, query_images, 3, weight=-1.0)
    with pytest.raises(ValueError, match="do not fit"):
        verify_windows(model, scores, windows, map_images[:5], query_images, 3, weight=1.0)


def test_checkpoint_round_trip(trained, tmp_path):
    model, record = trained
    path = save_pair_verifier(tmp_path / "v.safetensors", model, record, top_k=5, weight=0.5)
    loaded, header = load_pair_verifier(path)
    assert (header["top_k"], header["weight"], header["hidden"]) == (5, 0.5, 16)
    a, b = _shrunk([3, 4], 1), _shrunk([3, 5], 2)
    assert torch.allclose(model.symmetric(a, b), loaded.symmetric(a, b), atol=5e-3)


def test_bad_checkpoints_are_refused_with_the_reason(trained, tmp_path):
    model, record = trained
    good = save_pair_verifier(tmp_path / "good.safetensors", model, record)
    header, tensors = read_tagged(good, HEADER_KEY, 1, "pair verifier", CheckpointError)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_pair_verifier(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_pair_verifier(tmp_path / "junk.safetensors")
    nan = {**tensors, "head.2.bias": torch.full_like(tensors["head.2.bias"], float("nan"))}
    for name, (h, t) in {"nan": (header, nan), "shape": (dict(header, hidden=8), tensors),
                         "missing": (header, {k: v for k, v in tensors.items()
                                              if k != "head.0.weight"})}.items():
        path = write_tagged(tmp_path / f"{name}.safetensors", HEADER_KEY, h, t)
        with pytest.raises(CheckpointError, match="does not fit its header"):
            load_pair_verifier(path)
    for name, h in {"weight": dict(header, weight=-1.0), "top_k": dict(header, top_k=0),
                    "size": dict(header, size=30)}.items():
        path = write_tagged(tmp_path / f"{name}.safetensors", HEADER_KEY, h, tensors)
        with pytest.raises(CheckpointError, match="bad header"):
            load_pair_verifier(path)
    path = write_tagged(tmp_path / "version.safetensors", HEADER_KEY, dict(header, version=2),
                        tensors)
    with pytest.raises(CheckpointError, match="version"):
        load_pair_verifier(path)


def test_training_refuses_unusable_scenes():
    scene = {"images": torch.zeros(4, 3, SIZE, SIZE, dtype=torch.uint8),
             "overlap": torch.ones(4, 4), "traversal": torch.zeros(4, dtype=torch.long)}
    with pytest.raises(ValueError, match="across traversals"):  # one traversal only
        train_pair_verifier([scene], steps=1, progress=False)
    with pytest.raises(ValueError, match="no traversal numbers"):
        train_pair_verifier([{k: v for k, v in scene.items() if k != "traversal"}], steps=1,
                            progress=False)
    with pytest.raises(ValueError, match="no training scenes"):
        train_pair_verifier([], steps=1, progress=False)


def test_shipped_pair_verifier_is_small_and_loads():
    path = default_checkpoint("covisibility_pair_verifier")
    assert path is not None, "the pair verifier asset is not shipped"
    assert path.stat().st_size < 3 * 2**20
    model, header = load_pair_verifier(path)
    assert isinstance(model, PairVerifier)
    # The GPU-trained verifier fine-tuned on look-alikes, both runs complete and recorded.
    tuned = header["training"]["finetune"]
    assert tuned["done_steps"] == tuned["steps"] and tuned["triplets"] > 0
    assert tuned["base"]["done_steps"] == tuned["base"]["steps"]
    assert tuned["base"]["device"].startswith("cuda")


def test_cli_trains_on_sim_scenes_and_saves_as_it_goes(tmp_path):
    """``g2g-covis train-pair-verifier`` on real simulator scenes with depth (a few steps): the
    file records the run and the re-ranking settings; image data without traversal numbers
    (an older image-embedding file) is refused with the reason."""
    from g2g_model.covisibility.cli import main
    from sim_fixtures import tiny_trajectories

    root = tmp_path / "scenes"
    tiny_trajectories(root, 40002, frames=6, traversals=2, rig="ring4", depth=True)
    out, data = tmp_path / "verifier.safetensors", tmp_path / "images.pt"
    args = ["train-pair-verifier", "--root", str(root), "--out", str(out), "--data",
            str(data), "--steps", "3", "--batch-size", "10", "--size", "16", "--width", "2",
            "--hidden", "4", "--stride", "1", "--top-k", "6", "--weight", "0.7", "-q"]
    # A left-over training state of other settings is refused; --no-resume removes it.
    state = tmp_path / "verifier.safetensors.state.pt"
    torch.save({"record": {"steps": 999}}, str(state))
    assert main(args) == 2 and state.exists()
    assert main(args + ["--no-resume"]) == 0 and not state.exists()
    _, header = load_pair_verifier(out)
    assert (header["top_k"], header["weight"]) == (6, 0.7)
    assert header["training"]["frames"] == 2 * 4 * 6 and header["training"]["root"] == str(root)
    assert header["training"]["done_steps"] == 3
    stored = torch.load(str(data))
    assert stored[0]["traversal"].tolist() == [0] * 24 + [1] * 24
    # Two worker processes build the same data as one.
    data2 = tmp_path / "images2.pt"
    args2 = [data2 if a == str(data) else a for a in args]
    assert main([str(a) for a in args2] + ["--workers", "2", "--steps", "1"]) == 0
    again = torch.load(str(data2))
    assert len(again) == len(stored) == 1
    assert all(torch.equal(again[0][k], stored[0][k]) for k in stored[0])
    assert main(args + ["--workers", "0"]) == 2
    torch.save([{k: v for k, v in s.items() if k != "traversal"} for s in stored], str(data))
    assert main(args) == 2


def test_an_interrupted_run_resumes_to_the_same_model(tmp_path, monkeypatch):
    """Training state is saved every ``save_every`` steps; a run killed after step 45 and
    started again continues from step 40 and ends with the weights of an uninterrupted run.
    A state file of other settings is refused."""
    import g2g_model.covisibility.pair_verifier as pv

    gen = torch.Generator().manual_seed(0)
    scenes = [_scene(range(s * 4, s * 4 + 4), 3, gen) for s in range(2)]
    kwargs = dict(steps=60, batch_size=10, width=2, hidden=4, progress=False)
    straight, _ = train_pair_verifier(scenes, **kwargs)
    state = tmp_path / "v.state.pt"
    fit = pv.fit_pair_model

    def killed_after_45(model, steps, lr, batch_loss, *args):
        calls = [0]

        def counted():
            calls[0] += 1
            if calls[0] > 45:
                raise KeyboardInterrupt
            return batch_loss()
        return fit(model, steps, lr, counted, *args, save_every=20)
    with monkeypatch.context() as patch:
        patch.setattr(pv, "fit_pair_model", killed_after_45)
        with pytest.raises(KeyboardInterrupt):
            train_pair_verifier(scenes, state_path=state, **kwargs)
    assert torch.load(str(state), weights_only=False)["step"] == 40
    with pytest.raises(ValueError, match="other settings"):
        train_pair_verifier(scenes, state_path=state, **dict(kwargs, batch_size=12))
    resumed, record = train_pair_verifier(scenes, state_path=state, **kwargs)
    assert record["done_steps"] == 60 and not state.exists()
    for key, value in straight.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[key]), key


def _marked(place, variant, gen):
    """A place's image with a small corner mark, white (variant 1) or black (variant 0)."""
    img = place_image(place, gen).copy()
    img[:12, :12] = 255 * variant
    return shrink(img, SIZE)


def _variant_scene(places, gen):
    """Two traversals of places seen in two variants (a corner mark): frames of one place
    overlap 0.8 when their marks agree and 0.2 when they do not (look-alike but different)."""
    keys = [(p, v, t) for p in places for v in (0, 1) for t in (0, 1) for _ in range(2)]
    images = torch.stack([_marked(p, v, gen) for p, v, _ in keys])
    place = torch.tensor([k[0] for k in keys])
    variant = torch.tensor([k[1] for k in keys])
    same = place[:, None] == place[None]
    overlap = torch.where(variant[:, None] == variant[None], 0.8, 0.2) * same
    return {"images": images, "overlap": overlap.half(),
            "traversal": torch.tensor([k[2] for k in keys])}


def _order(model, places, seed):
    """How often a frame scores its look-alike of the same mark above the one of the other
    mark, and by how much on average (true gap 0.6; unseen images of ``places``)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.stack([_marked(p, v, gen) for p in places for v in (0, 1)])
    same = torch.stack([_marked(p, v, gen) for p in places for v in (0, 1)])
    other = torch.stack([_marked(p, 1 - v, gen) for p in places for v in (0, 1)])
    gap = model.symmetric(q, same) - model.symmetric(q, other)
    return float((gap > 0).float().mean()), float(gap.mean())


def test_confusable_frames_are_the_nearest_of_other_traversals():
    gen = torch.Generator().manual_seed(3)
    scene = _variant_scene([0, 1, 2], gen)
    torch.manual_seed(0)
    embedding = ImageEmbedding(SIZE, 4, 8).eval()
    near = confusable_frames([scene], embedding, 5)[0]
    assert near.shape == (24, 5)
    traversal = scene["traversal"]
    assert torch.all(traversal[near] != traversal[:, None])
    with torch.no_grad():
        d = embedding(scene["images"])
    sim = d @ d.T
    for f in range(24):   # the same frames a brute-force search ranks first
        others = [g for g in range(24) if traversal[g] != traversal[f]]
        best = sorted(others, key=lambda g: -float(sim[f, g]))[:5]
        assert torch.allclose(sim[f, near[f]], sim[f, best])
    with pytest.raises(ValueError, match="fewer than 13"):
        confusable_frames([scene], embedding, 13)
    with pytest.raises(ValueError, match="takes 16 px"):
        confusable_frames([scene], ImageEmbedding(16, 4, 8), 5)


def test_finetune_learns_to_order_look_alike_frames(trained):
    """The base verifier (trained on 'same place or not') cannot tell a place's two variants
    apart; the fine-tune on confusable triplets learns to, on places it never saw, and keeps the
    batch-norm statistics."""
    import copy

    base, _ = trained
    model = copy.deepcopy(base)
    gen = torch.Generator().manual_seed(4)
    scenes = [_variant_scene(range(s * 3, s * 3 + 3), gen) for s in range(4)]
    torch.manual_seed(0)
    embedding = ImageEmbedding(SIZE, 4, 8).eval()
    unseen = list(range(200, 212))
    before = _order(base, unseen, 9)
    tuned, record = finetune_pair_verifier(model, scenes, embedding, steps=150, lr=5e-3,
                                           pairs=8, triplets=24, neighbours=9, progress=False)
    after = _order(tuned, unseen, 9)
    print(f"look-alikes ordered (rate, mean gap): base {before}, fine-tuned {after}")
    assert after[0] >= 0.9 and after[1] > 0.3 and after[1] > before[1] + 0.2
    assert record["done_steps"] == 150 and record["batch_size"] == 56
    assert record["triplet_frames"] == 4 * 24
    for name, buf in base.named_buffers():
        assert torch.equal(buf, dict(tuned.named_buffers())[name]), name
    with pytest.raises(ValueError, match="nothing to fine-tune on"):
        flat = dict(scenes[0], overlap=torch.full_like(scenes[0]["overlap"], 0.5))
        finetune_pair_verifier(copy.deepcopy(base), [flat], embedding, steps=1, neighbours=9,
                               progress=False)
    with pytest.raises(ValueError, match="takes 32 px images, the scenes hold 16"):
        small = dict(scenes[0], images=scenes[0]["images"][:, :, :16, :16])
        finetune_pair_verifier(copy.deepcopy(base), [small], ImageEmbedding(16, 4, 8),
                               steps=1, neighbours=9, progress=False)


def test_cli_finetunes_a_verifier_file(trained, tmp_path, capsys):
    """``g2g-covis finetune-pair-verifier`` on real simulator scenes (a few steps): the file
    records the fine-tune and the base run and keeps the base file's re-ranking settings
    unless told otherwise; a missing base file or images of another size are refused."""
    import hashlib

    from g2g_model.covisibility.cli import main
    from g2g_model.covisibility.image_embedding import save_image_embedding
    from sim_fixtures import tiny_trajectories

    root = tmp_path / "scenes"
    tiny_trajectories(root, 40003, frames=6, traversals=2, rig="ring4", depth=True)
    torch.manual_seed(0)
    base = save_pair_verifier(tmp_path / "base.safetensors", PairVerifier(16, 2, 4).eval(),
                              {"steps": 7}, top_k=5, weight=1.5)
    embedding = save_image_embedding(tmp_path / "emb.safetensors",
                                     ImageEmbedding(16, 2, 8).eval(), {"steps": 0})
    out = tmp_path / "tuned.safetensors"
    args = ["finetune-pair-verifier", "--root", str(root), "--out", str(out), "--init",
            str(base), "--image-embedding", str(embedding), "--data", str(tmp_path / "i.pt"),
            "--steps", "2", "--pairs", "4", "--triplets", "3", "--neighbours", "4",
            "--stride", "1", "-q"]
    assert main(args) == 0
    _, header = load_pair_verifier(out)
    assert (header["top_k"], header["weight"]) == (5, 1.5)
    record = header["training"]["finetune"]
    assert record["done_steps"] == 2 and record["base"] == {"steps": 7}
    assert record["init"] == str(base) and record["root"] == str(root)
    assert record["init_sha256"] == hashlib.sha256(base.read_bytes()).hexdigest()
    assert main(args + ["--weight", "0.5"]) == 0
    assert load_pair_verifier(out)[1]["weight"] == 0.5
    # The training state of a run from another base file is not resumed: it is refused.
    state = tmp_path / "tuned.safetensors.state.pt"
    stale = {k: record[k] for k in ("steps", "batch_size", "lr", "seed", "scenes", "frames")}
    torch.save({"record": dict(stale, init_sha256="0" * 64)}, str(state))
    capsys.readouterr()
    assert main(args) == 2 and "init_sha256" in capsys.readouterr().err
    assert main(args + ["--no-resume"]) == 0 and not state.exists()
    assert main([a if a != str(base) else str(tmp_path / "none") for a in args]) == 2
    big = save_pair_verifier(tmp_path / "big.safetensors", PairVerifier(32, 2, 4).eval(),
                             {"steps": 7})
    assert main([a if a != str(base) else str(big) for a in args]) == 2
