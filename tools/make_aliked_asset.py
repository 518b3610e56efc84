"""Convert the published ALIKED weights (Shiaoming/ALIKED, BSD-3-Clause) to our safetensors file.

The pretrained state dicts are committed in the public repository
https://github.com/Shiaoming/ALIKED as ``models/aliked-<variant>.pth``. This script reads one of
them from a local ``.pth`` copy, a local clone (``--source DIR``, any git dir or work tree; the
file is read at ``--commit``) or, without ``--source``, a fresh shallow clone; checks its sha256,
loads it with ``weights_only=True`` and writes ``aliked_<variant>.safetensors`` with the source
repository, commit, path, license and the sha256 of the original in the header. Run from the
repository root (the default output is the git-ignored ``outputs/aliked/``):

    python tools/make_aliked_asset.py --variant t16 [--source PATH] [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from g2g_model.backbones.aliked import (ALIKED, ASSET_KEY, ASSET_VERSION,  # noqa: E402
                                        VARIANTS)
from g2g_model.tagged_safetensors import write_tagged  # noqa: E402

REPO = "https://github.com/Shiaoming/ALIKED"
# The newest commit read; the model files are unchanged since they were added (ef4a438).
COMMIT = "683d7c65197395c0b3f01ebe76e1084a27e73a65"
SHA256 = {
    "t16": "56782336919db220144a884e710e2b6af13b3b8f8da15b915a239078ab471085",
    "n16": "5be8704840ed662d9d8c561bf7279c222092674e7eb05fd0feab94899e9d82f2",
}
LICENSE = "BSD-3-Clause (ALIKED, Copyright (c) 2022, Zhao Xiaoming)"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_source(source: str, member: str, commit: str) -> bytes:
    if source and Path(source).is_file():
        return Path(source).read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        if not source:
            source = str(Path(tmp) / "ALIKED")
            subprocess.run(["git", "clone", "-q", REPO, source], check=True)
        git_dir = ["git", "--git-dir", source] if not (Path(source) / ".git").exists() \
            else ["git", "-C", source]
        return subprocess.run(git_dir + ["show", f"{commit}:{member}"], check=True,
                              capture_output=True).stdout


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="t16", choices=sorted(SHA256))
    parser.add_argument("--source", default="", help="a local .pth, or a clone / bare git dir "
                        "of the repository (else it is cloned)")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--out", default="", help="default outputs/aliked/aliked_<variant>"
                        ".safetensors")
    args = parser.parse_args(argv)
    member = f"models/aliked-{args.variant}.pth"
    data = _read_source(args.source, member, args.commit)
    if _sha256(data) != SHA256[args.variant]:
        parser.error(f"{member}: sha256 {_sha256(data)} is not the expected "
                     f"{SHA256[args.variant]}")
    state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    state = {key: value.contiguous() for key, value in state.items()}
    ALIKED(args.variant, load_weights=False).load_state_dict(state)  # strict: names and shapes
    c1, c2, c3, c4, dim, positions = VARIANTS[args.variant]
    header = {
        "version": ASSET_VERSION, "architecture": "aliked", "variant": args.variant,
        "channels": [c1, c2, c3, c4], "dim": dim, "sddh_positions": positions,
        "input": "RGB in [0, 1], no mean/std normalisation",
        "source": f"{REPO}, {member} at commit {args.commit}",
        "source_sha256": SHA256[args.variant], "license": LICENSE,
        "paper": "Zhao et al., ALIKED, IEEE T-IM 72, 2023 (arXiv 2304.03608)",
    }
    out = Path(args.out or ROOT / "outputs" / "aliked" / f"aliked_{args.variant}.safetensors")
    out = write_tagged(out, ASSET_KEY, header, state)
    print(f"wrote {out} ({len(state)} tensors, {out.stat().st_size} bytes, "
          f"sha256 {_sha256(out.read_bytes())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
