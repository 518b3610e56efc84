"""g2g-data merge: one training root from two collections (scene links, concatenated indexes);
training groups load through it from both; clashes and missing indexes are refused."""

import csv
import json

import pytest

from g2g_model.data import cli as data_cli
from g2g_model.data.merge import merge_collections
from g2g_model.training.pair_dataset import PairDataset, read_pairs
from g2g_model.training.smoke_data import SMOKE_WINDOW, make_smoke_collection
from g2g_model.training.trajectory_groups import TrajectoryStore

INDEX_JSON = f"pairs_w{SMOKE_WINDOW}.json"


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp("merge")
    return (make_smoke_collection(base / "a", frames=12, image_size=32, split="train"),
            make_smoke_collection(base / "b", frames=12, image_size=32, split="val"))


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_merged_root_trains_on_both(roots, tmp_path):
    out = tmp_path / "ab"
    assert data_cli.main(["merge", str(roots[0]), str(roots[1]), "--out", str(out),
                          "--index", "rig_pairs.csv", "--index", INDEX_JSON]) == 0
    rows = _rows(out / "rig_pairs.csv")
    parts = [_rows(r / "rig_pairs.csv") for r in roots]
    assert rows == parts[0] + parts[1] and parts[0] and parts[1]
    windows = json.loads((out / INDEX_JSON).read_text())
    assert len(windows) == sum(len(json.loads((r / INDEX_JSON).read_text())) for r in roots)
    scenes = {row["traj_a"].split("/")[0] for row in rows}
    assert len(scenes) == 2 and all((out / s).is_symlink() for s in scenes)
    items = read_pairs("rig", out, "rig_pairs.csv", seed=0)
    store = TrajectoryStore(out, (32, 32))
    loaded = {spec[1].split("/")[0] for spec in PairDataset(items, store).group_specs()}
    assert loaded == scenes
    for spec in (items[0].spec_a, items[-1].spec_b):
        assert store.load(spec).images.shape[-2:] == (32, 32)
    # Again: the links agree, nothing new is linked, the indexes are rewritten the same.
    again = merge_collections(out, roots, ["rig_pairs.csv"])
    assert again["scenes_linked"] == 0 and _rows(out / "rig_pairs.csv") == rows


def test_clash_and_missing_index_are_refused(roots, tmp_path):
    out = tmp_path / "clash"
    out.mkdir()
    scene = next(p for p in roots[0].iterdir() if p.is_dir())
    (out / scene.name).symlink_to(roots[1], target_is_directory=True)
    with pytest.raises(ValueError, match="two collections hold a scene"):
        merge_collections(out, roots, [])
    with pytest.raises(ValueError, match="missing in"):
        merge_collections(tmp_path / "x", roots, ["nope.csv"])
    with pytest.raises(SystemExit, match="g2g-data merge: .*missing in"):
        data_cli.main(["merge", str(roots[0]), str(roots[1]), "--out", str(tmp_path / "y"),
                       "--index", "nope.csv"])
