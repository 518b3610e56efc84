"""``g2g-weights``: download (from a local server that answers like the Hugging Face Hub),
verify, convert and describe the official release; ``--from`` a folder fetched by hand.

No network: ``HF_ENDPOINT`` points at :class:`hub_server.HubServer` on 127.0.0.1, which serves
a tiny release in the real one's layout (ten G2G-only ``.pth`` files with their released W and
a ``map-anything-model/`` folder) plus files g2g-weights must leave alone.
"""

import json
import os
import pathlib
import subprocess
import sys
import tarfile

import pytest
import yaml

from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.release.prepare import RELEASED
from hub_server import HubServer
from paper_fixtures import TINY_FEATURE_DIM, tiny_official_pth, tiny_release

REPO = "feixue22/G2G"


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory):
    return tiny_release(tmp_path_factory.mktemp("release"))


def _hub_files(release_dir: pathlib.Path) -> dict:
    files = {str(p.relative_to(release_dir)): p.read_bytes()
             for p in release_dir.rglob("*") if p.is_file()}
    files["examples/HM3D-Reloc-example.zip"] = b"not needed"   # must not be downloaded
    files["README.md"] = b"# G2G weights\n"
    return files


def _run(args, tmp_path, endpoint=None):
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf_home"), HF_HUB_DISABLE_TELEMETRY="1",
               NO_PROXY="127.0.0.1,localhost")
    env.pop("HF_HUB_OFFLINE", None)
    if endpoint:
        env["HF_ENDPOINT"] = endpoint
    return subprocess.run([sys.executable, "-m", "g2g_model.release.cli", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_download_verify_convert_and_manifest(release_dir, tmp_path):
    out = tmp_path / "weights"
    with HubServer(REPO, _hub_files(release_dir)) as hub:
        result = _run(["--out", str(out)], tmp_path, hub.url)
        fetched = {p for method, p in hub.requests if method == "GET" and "/resolve/" in p}
    assert result.returncode == 0, result.stderr
    assert not any("examples" in p or "README" in p for p in fetched), fetched
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"]["kind"] == "hub" and manifest["source"]["repo_id"] == REPO
    assert len(manifest["checkpoints"]) == 10
    assert manifest["backbone"]["feature_dim"] == TINY_FEATURE_DIM
    for name, entry in manifest["checkpoints"].items():
        assert entry["max_frames"] == RELEASED[name + ".pth"].frames
        assert pathlib.Path(entry["checkpoint"]).is_file()
    assert manifest["rigs"]["nclt"] == {"relocalize": "NCLT-Reloc", "map_builder": "NCLT-Reloc",
                                        "rig_odometry": "NCLT-Rig-Cross"}
    assert manifest["rigs"]["zjh"]["rig_odometry"] == "ZJH-Rig-4"
    assert manifest["checkpoints"]["ZJH-Rig-4"]["max_frames"] == 4
    assert manifest["rigs"]["sim"]["relocalize"] == "HM3D-Reloc"
    params = yaml.safe_load(pathlib.Path(manifest["params_files"]["nclt"]).read_text())
    reloc = params["relocalize"]["ros__parameters"]
    assert reloc["checkpoint"] == manifest["checkpoints"]["NCLT-Reloc"]["checkpoint"]
    assert reloc["backbone_weights"] == manifest["backbone"]["path"]
    # What the manifest names runs: the nodes' loader takes exactly these two paths.
    from g2g_ros.model_loading import load_pipeline

    pipe = load_pipeline(reloc["checkpoint"], "cpu", "relocalization", "fp32",
                         reloc["backbone_weights"])
    assert pipe.max_frames == 5 and pipe.backbone.feature_dim == TINY_FEATURE_DIM
    shown = _run(["--show", str(out)], tmp_path)
    assert shown.returncode == 0 and "rig:=zjh" in shown.stdout and "W=4" in shown.stdout


def test_truncated_or_broken_downloads_are_refused(release_dir, tmp_path):
    files = _hub_files(release_dir)
    name = "release_weights/NCLT-Reloc.pth"
    truncated = {name: files[name][: len(files[name]) // 2]}
    with HubServer(REPO, files, corrupt=truncated) as hub:
        result = _run(["--out", str(tmp_path / "a"), "--only", "NCLT-Reloc"], tmp_path,
                      hub.url)
    assert result.returncode == 2
    assert f"{name}: {len(truncated[name])} bytes, the hub says {len(files[name])}" in \
        result.stderr, result.stderr
    with HubServer(REPO, files, cut={name: 100}) as hub:
        result = _run(["--out", str(tmp_path / "b"), "--only", "NCLT-Reloc"], tmp_path,
                      hub.url)
    assert result.returncode == 2 and f"download of {name}" in result.stderr, result.stderr
    flipped = bytearray(files[name])
    flipped[-200] ^= 0xFF
    with HubServer(REPO, files, corrupt={name: bytes(flipped)}) as hub:
        result = _run(["--out", str(tmp_path / "c"), "--only", "NCLT-Reloc"], tmp_path,
                      hub.url)
    assert result.returncode == 2 and "SHA-256" in result.stderr, result.stderr
    assert not (tmp_path / "c" / "NCLT-Reloc.safetensors").exists()


def test_from_a_folder_refuses_wrong_files_with_the_reason(release_dir, tmp_path):
    import shutil

    local = tmp_path / "by_hand"
    shutil.copytree(release_dir, local)
    weights = local / "release_weights"
    tiny_official_pth(weights / "ZJH-Rig-4.pth", frames=5)          # a W = 5 file named W = 4
    data = (weights / "NCLT-Reloc.pth").read_bytes()
    (weights / "NCLT-Reloc.pth").write_bytes(data[: len(data) // 2])  # truncated
    result = _run(["--from", str(local), "--out", str(tmp_path / "out")], tmp_path)
    assert result.returncode == 2
    assert "ZJH-Rig-4.pth" in result.stderr and "max_frames=4 was requested" in result.stderr
    assert "NCLT-Reloc.pth" in result.stderr and "cannot read official weights" in result.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()

    (weights / "HM3D-Rig-8.pth").unlink()
    result = _run(["--from", str(local), "--out", str(tmp_path / "out")], tmp_path)
    assert result.returncode == 2 and "lacks G2G weights ['HM3D-Rig-8.pth']" in result.stderr

    giant = tmp_path / "giant"
    shutil.copytree(release_dir, giant)
    config = giant / "map-anything-model" / "config.json"
    config.write_text(json.dumps({
        "encoder_config": {"encoder_str": "dinov2", "size": "giant"},
        "info_sharing_config": {"model_type": "alternating_attention", "module_args": {}},
        "geometric_input_config": {}}))
    result = _run(["--from", str(giant), "--out", str(tmp_path / "g")], tmp_path)
    assert result.returncode == 2 and "refused" in result.stderr
    assert "giant" in result.stderr and "v1.0.1" in result.stderr


def test_from_a_folder_with_the_backbone_as_an_archive(release_dir, tmp_path):
    local = tmp_path / "mirror"
    (local / "release_weights").mkdir(parents=True)
    for path in (release_dir / "release_weights").iterdir():
        (local / "release_weights" / path.name).write_bytes(path.read_bytes())
    with tarfile.open(local / "map-anything-model.tar.gz", "w:gz") as tar:
        tar.add(release_dir / "map-anything-model", arcname="map-anything-model")
    out = tmp_path / "out"
    result = _run(["--from", str(local), "--out", str(out), "--only", "ZJH-Reloc", "ZJH-Rig-4"],
                  tmp_path)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["checkpoints"]) == {"ZJH-Reloc", "ZJH-Rig-4"}
    assert set(manifest["rigs"]) == {"zjh"}
    backbone = pathlib.Path(manifest["backbone"]["path"])
    assert backbone.is_relative_to(out) and (backbone / "model.safetensors").is_file()
    pipe = G2GPipeline.from_checkpoint(manifest["checkpoints"]["ZJH-Rig-4"]["checkpoint"],
                                       backbone_weights=backbone)
    assert pipe.max_frames == 4
    # A repeated run reuses what it converted from the same files; another file in the way of
    # an output is not overwritten without --force.
    converted = pathlib.Path(manifest["checkpoints"]["ZJH-Reloc"]["checkpoint"])
    stamp = converted.stat().st_mtime_ns
    args = ["--from", str(local), "--out", str(out), "--only", "ZJH-Reloc", "ZJH-Rig-4"]
    assert _run(args, tmp_path).returncode == 0
    assert converted.stat().st_mtime_ns == stamp
    tiny_official_pth(local / "release_weights" / "ZJH-Reloc.pth", frames=5, seed=99)
    result = _run(args, tmp_path)
    assert result.returncode == 2 and "was not converted from this file" in result.stderr
    assert _run(args + ["--force"], tmp_path).returncode == 0
    assert converted.stat().st_mtime_ns != stamp
