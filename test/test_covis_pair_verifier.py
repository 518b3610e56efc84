"""The pair verifier: training, symmetric scores, window re-ranking, strict checkpoints, the
asset and its CLI."""

import numpy as np
import pytest
import torch

from g2g_model.covisibility.checkpoint import CheckpointError
from g2g_model.covisibility.image_embedding import shrink
from g2g_model.covisibility.pair_verifier import (HEADER_KEY, PairVerifier, candidate_windows,
                                                  load_pair_verifier, save_pair_verifier,
                                                  train_pair_verifier, verify_windows)
from g2g_model.inference import default_checkpoint
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
    assert header["training"]["done_steps"] == header["training"]["steps"]


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
