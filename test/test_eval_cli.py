"""g2g-eval on a tiny held-out index: tables without NaN, per-pair CSV, plots, errors."""

import csv

import pytest
import torch

from g2g_model.backbones.compact import CompactBackbone
from g2g_model.model.checkpoint import save_checkpoint
from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel
from g2g_model.training.eval_cli import main as eval_main
from g2g_model.training.smoke_data import make_smoke_collection


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    return make_smoke_collection(tmp_path_factory.getbasetemp() / "smoke_collection")


def _checkpoint(path, max_frames=4):
    torch.manual_seed(0)
    backbone = CompactBackbone("compact_xs")
    model = G2GModel(preset("tiny", input_dim=backbone.feature_dim, max_frames=max_frames))
    save_checkpoint(path, model, backbone_name="compact",
                    backbone_config=backbone.config.to_dict(),
                    backbone_state_dict=backbone.state_dict())
    return str(path)


@pytest.mark.parametrize("task, index, mode", [("reloc", "pairs_w3.json", "clean"),
                                               ("rig", "rig_pairs.csv", "noisy")])
def test_eval_writes_tables_csv_and_plots(smoke, tmp_path, task, index, mode):
    ckpt = _checkpoint(tmp_path / "g2g_tiny.safetensors")
    out = tmp_path / "eval"
    rc = eval_main(["--task", task, "--root", str(smoke), "--index", index, "--checkpoint", ckpt,
                    "--classical", "fast", "--ablation", "--identity", "--mode", mode,
                    "--max-pairs", "3", "--out", str(out), "-q"])
    assert rc == 0
    table = (out / "comparison.md").read_text()
    assert "nan" not in table.lower()
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]
    assert [r.split("|")[1].strip() for r in rows] == [
        "identity", "g2g_tiny", "g2g_tiny+nocross_switch", "classical"]
    for label in ("g2g_tiny", "g2g_tiny+nocross_switch", "classical"):
        metrics = (out / label / "metrics.md").read_text()
        assert "nan" not in metrics.lower() and "rot_err_median" in metrics
        assert "a_all" in metrics and "b_all" in metrics
        with open(out / label / "pairs.csv") as fh:
            pairs = list(csv.DictReader(fh))
        assert len(pairs) == 3 and all(float(p["trans_err_m"]) >= 0 for p in pairs)
    if task == "reloc":  # overlap-bin breakdown for scored pairs
        assert "b0 [0.5,1]" in (out / "g2g_tiny" / "metrics.md").read_text()
    # the switch changes the predictions of the same weights
    with open(out / "g2g_tiny" / "pairs.csv") as fh:
        full = [float(p["rot_err_deg"]) for p in csv.DictReader(fh)]
    with open(out / "g2g_tiny+nocross_switch" / "pairs.csv") as fh:
        ablated = [float(p["rot_err_deg"]) for p in csv.DictReader(fh)]
    assert full != ablated
    with open(out / "identity" / "pairs.csv") as fh:  # "no motion": error = true distance
        for p in csv.DictReader(fh):
            expected = float(p["gt_distance_m"])
            assert float(p["trans_err_m"]) == pytest.approx(expected, abs=1e-6)
    # paired.md: every other method against the checkpoint, on the same pairs
    paired = (out / "paired.md").read_text()
    assert "nan" not in paired.lower()
    paired_rows = [line.split("|")[1].strip() for line in paired.splitlines()
                   if line.startswith("| ")][1:]
    assert paired_rows == [f"{x} vs g2g_tiny" for x in
                           ("identity", "g2g_tiny+nocross_switch", "classical")]
    for png in ("maa_curve.png", "error_vs_overlap.png"):
        assert (out / png).stat().st_size > 1000


@pytest.mark.parametrize("task, index", [("reloc", "pairs_w3.json"), ("rig", "rig_pairs.csv")])
def test_eval_verify_adds_verified_and_geometry_rows(smoke, tmp_path, task, index, capsys):
    ckpt = _checkpoint(tmp_path / "g2g_tiny.safetensors")
    out = tmp_path / "eval"
    rc = eval_main(["--task", task, "--root", str(smoke), "--index", index, "--checkpoint", ckpt,
                    "--identity", "--verify", "--max-pairs", "3", "--out", str(out)])
    assert rc == 0
    rows = [line.split("|")[1].strip() for line in
            (out / "comparison.md").read_text().splitlines() if line.startswith("| ")][1:]
    assert rows == ["identity", "geometry", "g2g_tiny", "g2g_tiny+verified"]
    report = (out / "verification.md").read_text()
    assert "accepted_share" in report and "false_accepts" in report
    captured = capsys.readouterr()
    assert "geometry" in captured.out
    # Without -q but not on a terminal (pytest captures): no progress bar in the log.
    assert "pair/s" not in captured.err and "eval:" not in captured.err, captured.err
    paths = {}
    for label in ("geometry", "g2g_tiny", "g2g_tiny+verified", "identity"):
        with open(out / label / "pairs.csv") as fh:
            paths[label] = list(csv.DictReader(fh))
    assert {p["path"] for p in paths["g2g_tiny"]} == {""}
    for label, fallback in (("geometry", "identity"), ("g2g_tiny+verified", "g2g_tiny")):
        for mine, theirs in zip(paths[label], paths[fallback]):
            assert mine["path"] in ("g2g", "verified", "refined")
            if mine["path"] == "g2g":  # no trustworthy geometry: the seed's prediction stays
                assert float(mine["rot_err_deg"]) == pytest.approx(float(theirs["rot_err_deg"]))
            else:
                assert int(mine["inliers"]) >= 30


def test_eval_errors_before_work(smoke, tmp_path, capsys):
    (tmp_path / "empty.json").write_text("[]")
    base = ["--task", "reloc", "--root", str(smoke), "--out", str(tmp_path / "o"), "-q"]
    assert eval_main(base + ["--index", "../" + tmp_path.name + "/empty.json",
                             "--classical"]) == 2
    assert "is empty" in capsys.readouterr().err
    assert eval_main(base + ["--index", "pairs_w3.json", "--checkpoint", "/no/x.safetensors"]) == 2
    assert "does not exist" in capsys.readouterr().err
    small = _checkpoint(tmp_path / "small.safetensors", max_frames=2)
    assert eval_main(base + ["--index", "pairs_w3.json", "--checkpoint", small]) == 2
    assert "max_frames=2" in capsys.readouterr().err
    assert eval_main(base + ["--index", "pairs_w3.json"]) == 2
    assert "no method" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_reverse_fraction_exchanges_the_groups(smoke, tmp_path):
    # --reverse-fraction 1: the same pairs with A and B exchanged (a rig driving backwards).
    def pairs(reverse):
        out = tmp_path / f"rev{reverse}"
        assert eval_main(["--task", "rig", "--root", str(smoke), "--index", "rig_pairs.csv",
                          "--identity", "--max-pairs", "3", "--reverse-fraction", reverse,
                          "--out", str(out), "-q"]) == 0
        with open(out / "identity" / "pairs.csv") as fh:
            return [(p["group_a"], p["group_b"], float(p["gt_distance_m"]))
                    for p in csv.DictReader(fh)]

    forward, backward = pairs("0"), pairs("1")
    assert [(b, a) for a, b, _ in forward] == [(a, b) for a, b, _ in backward]
    assert [d for *_, d in forward] == pytest.approx([d for *_, d in backward], abs=1e-6)
    assert any(a != b for a, b, _ in forward)


def test_directions_flag_adds_the_other_way(smoke, tmp_path):
    # A checkpoint without a relocalization header runs one way; --directions adds the same
    # weights run both ways, which changes its predictions.
    ckpt = _checkpoint(tmp_path / "g2g_tiny.safetensors")
    out = tmp_path / "eval"
    assert eval_main(["--task", "reloc", "--root", str(smoke), "--index", "pairs_w3.json",
                      "--checkpoint", ckpt, "--directions", "--max-pairs", "3",
                      "--out", str(out), "-q"]) == 0
    errors = {}
    for label in ("g2g_tiny", "g2g_tiny+flipped_directions"):
        with open(out / label / "pairs.csv") as fh:
            errors[label] = [float(p["rot_err_deg"]) for p in csv.DictReader(fh)]
    assert len(errors["g2g_tiny"]) == 3
    assert errors["g2g_tiny"] != errors["g2g_tiny+flipped_directions"]


def test_constant_step_is_the_median_true_step(smoke, tmp_path):
    # --constant-step: B0 one translation from A0, the per-axis median of the scored pairs'
    # true translations; its error on each pair is the distance from that pair's truth.
    import numpy as np

    from g2g_model.training.pair_dataset import PairDataset, read_pairs
    from g2g_model.training.trajectory_groups import TrajectoryStore

    out = tmp_path / "const"
    assert eval_main(["--task", "rig", "--root", str(smoke), "--index", "rig_pairs.csv",
                      "--identity", "--constant-step", "--max-pairs", "4", "--out", str(out),
                      "-q"]) == 0
    items = read_pairs("rig", str(smoke), "rig_pairs.csv", 0.0, 4, 0, 0.0)
    dataset = PairDataset(items, TrajectoryStore(str(smoke), (1, 1)))
    truths = np.array([dataset.targets(i)[1][0][:3, 3] for i in range(len(items))])
    step = np.median(truths, axis=0)
    assert np.linalg.norm(step) > 0.01  # the smoke rig moves: not "no motion" in disguise
    with open(out / "constant_step" / "pairs.csv") as fh:
        errors = [float(p["trans_err_m"]) for p in csv.DictReader(fh)]
    assert errors == pytest.approx(list(np.linalg.norm(truths - step, axis=1)), abs=1e-5)
    rows = [line.split("|")[1].strip() for line in
            (out / "comparison.md").read_text().splitlines() if line.startswith("| ")][1:]
    assert rows == ["identity", "constant_step"]


def test_cameras_selects_a_subset_of_the_rig(smoke, tmp_path, capsys):
    # --cameras: rig groups of the named cameras only, in that order (the first is the anchor),
    # as a 3- or 5-camera subset of a 6-camera car rig is evaluated with a model of 5 frames.
    import numpy as np

    from g2g_model.training.pair_dataset import PairDataset, read_pairs
    from g2g_model.training.trajectory_groups import TrajectoryStore

    store = TrajectoryStore(str(smoke), (1, 1))
    whole = PairDataset(read_pairs("rig", str(smoke), "rig_pairs.csv", 0.0, 3, 0, 0.0), store)
    part = PairDataset(read_pairs("rig", str(smoke), "rig_pairs.csv", 0.0, 3, 0, 0.0,
                                  cameras=["cam2", "cam0"]), store)
    spec = part.items[0].spec_a
    assert [c for c, _ in store.frames(spec)] == ["cam2", "cam0"]
    world = store.world_poses(whole.items[0].spec_a)
    assert np.allclose(store.world_poses(spec), world[[2, 0]])
    # Targets follow the subset's anchor: B0 relative to camera 2 of A.
    gt_a, gt_b = part.targets(0)
    assert gt_a.shape == (2, 4, 4) and np.allclose(gt_a[0], np.eye(4))
    assert not np.allclose(gt_b[0], whole.targets(0)[1][0])
    # Through g2g-eval, with a checkpoint of 2 frames that the whole rig (4 cameras) overflows.
    ckpt = _checkpoint(tmp_path / "two.safetensors", max_frames=2)
    base = ["--task", "rig", "--root", str(smoke), "--index", "rig_pairs.csv", "--checkpoint",
            ckpt, "--identity", "--max-pairs", "3", "-q"]
    assert eval_main(base + ["--out", str(tmp_path / "all")]) == 2
    assert "max_frames=2" in capsys.readouterr().err
    assert eval_main(base + ["--cameras", "cam2", "cam0", "--out", str(tmp_path / "two")]) == 0
    with open(tmp_path / "two" / "two" / "pairs.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 3
    # A camera the rig does not have, a repeated one, or cameras for relocalization windows.
    assert eval_main(base + ["--cameras", "cam0", "front", "--out", str(tmp_path / "x")]) == 2
    assert "no front" in capsys.readouterr().err
    assert eval_main(base[:6] + ["--identity", "--cameras", "front", "--out",
                                 str(tmp_path / "x"), "-q"]) == 2
    assert "no front" in capsys.readouterr().err
    assert eval_main(base + ["--cameras", "cam0", "cam0", "--out", str(tmp_path / "x")]) == 2
    assert "distinct" in capsys.readouterr().err
    assert eval_main(["--task", "reloc", "--root", str(smoke), "--index", "pairs_w3.json",
                      "--identity", "--cameras", "cam0", "--out", str(tmp_path / "x"), "-q"]) == 2
    assert "rig pairs" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
