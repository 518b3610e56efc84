"""``g2g-weights``: the official G2G release, from nothing to converted checkpoints.

``g2g-weights --out weights/``                  download from the Hugging Face Hub, verify,
                                                 convert, write manifest + parameter files
``g2g-weights --from ~/Downloads/G2G --out weights/``   the same for a release fetched by hand
``g2g-weights --show weights/``                 print what a manifest says

Downloads use ``huggingface_hub`` (``HF_ENDPOINT`` / ``--endpoint`` choose the server, its cache
and token settings apply). Every downloaded file is checked against the hub's own record: the
SHA-256 of LFS files, the git blob id of small ones; then every ``.pth`` must convert with its
known W and the backbone must load strictly (see :mod:`g2g_model.release.prepare`).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import pathlib
import sys
from typing import Dict, List, Optional

from g2g_model.model.checkpoint import sha256_of
from g2g_model.release.prepare import (
    BACKBONE_FILES,
    HUB_REPO,
    MANIFEST_NAME,
    RELEASED,
    is_archive,
    prepare_release,
    read_manifest,
)

LOG = logging.getLogger("g2g-weights")


def git_blob_id(path: str) -> str:
    """The git object id (SHA-1 of ``blob <size>\\0`` + content) the hub reports for
    files not stored in LFS."""
    digest = hashlib.sha1(f"blob {os.path.getsize(path)}\0".encode())
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def select_files(names: List[str], wanted: List[str]) -> List[str]:
    """The repository files to fetch: the wanted ``.pth`` files and the backbone (a folder
    with config.json + model.safetensors, else an archive whose name says map-anything)."""
    chosen = [n for n in names if os.path.basename(n) in wanted]
    folders = sorted({os.path.dirname(n) for n in names
                      if os.path.basename(n) == BACKBONE_FILES[1]
                      and os.path.join(os.path.dirname(n), BACKBONE_FILES[0]) in names})
    folders.sort(key=lambda d: "map-anything" not in d.lower())
    if folders:
        chosen += [os.path.join(folders[0], f) for f in BACKBONE_FILES]
    else:
        chosen += [n for n in names if is_archive(n)
                   and "anything" in os.path.basename(n).lower()]
    return chosen


def verify_download(path: str, sibling) -> None:
    """Compare a downloaded file with the hub's record of it (``ValueError`` if it differs)."""
    size = os.path.getsize(path)
    if sibling.lfs is not None:
        if size != sibling.lfs.size:
            raise ValueError(f"{sibling.rfilename}: {size} bytes, the hub says "
                             f"{sibling.lfs.size} (truncated download?)")
        digest = sha256_of(path)
        if digest != sibling.lfs.sha256:
            raise ValueError(f"{sibling.rfilename}: SHA-256 {digest} differs from the hub's "
                             f"{sibling.lfs.sha256} (corrupt or truncated file)")
    elif sibling.blob_id:
        blob = git_blob_id(path)
        if blob != sibling.blob_id:
            raise ValueError(f"{sibling.rfilename}: git blob id {blob} differs from the hub's "
                             f"{sibling.blob_id} (corrupt or truncated file)")
    else:
        raise ValueError(f"{sibling.rfilename}: the hub gave no checksum to verify it against")


def download_release(repo: str, revision: str, target: pathlib.Path, wanted: List[str],
                     endpoint: Optional[str] = None) -> Dict[str, object]:
    """Fetch the release files into ``target``; returns the manifest's ``source`` record."""
    from huggingface_hub import HfApi, hf_hub_download

    api = HfApi(endpoint=endpoint)
    where = f"{api.endpoint}/{repo}@{revision}"
    try:
        info = api.model_info(repo, revision=revision, files_metadata=True)
    except Exception as exc:  # hub errors, HTTP errors, connection errors: all "cannot list"
        raise ValueError(f"cannot list {where}: {type(exc).__name__}: {exc}") from exc
    siblings = {s.rfilename: s for s in info.siblings or []}
    chosen = select_files(sorted(siblings), wanted)
    absent = sorted(set(wanted) - {os.path.basename(n) for n in chosen})
    if absent:
        raise ValueError(f"{where} does not hold {absent}")
    record = {}
    for name in chosen:
        LOG.warning("downloading %s", name)
        try:
            path = hf_hub_download(repo, name, revision=info.sha, local_dir=str(target),
                                   endpoint=api.endpoint)
        except Exception as exc:  # as above: report which file and why, whatever the type
            raise ValueError(f"download of {name} from {where} failed: "
                             f"{type(exc).__name__}: {exc}") from exc
        verify_download(path, siblings[name])
        record[name] = siblings[name].lfs.sha256 if siblings[name].lfs else \
            siblings[name].blob_id
    return {"kind": "hub", "endpoint": api.endpoint, "repo_id": repo, "revision": info.sha,
            "files": record}


def _show(path: str) -> int:
    manifest = read_manifest(pathlib.Path(path))
    print(f"source: {manifest['source']}")
    print(f"backbone: {manifest['backbone']['path']} ({manifest['backbone']['feature_dim']}-dim)")
    for name, entry in sorted(manifest["checkpoints"].items()):
        print(f"  {name:<22} {entry['task']:<15} W={entry['max_frames']}  {entry['checkpoint']}")
    for rig, nodes in sorted(manifest["rigs"].items()):
        print(f"rig:={rig}: " + ", ".join(f"{n} <- {c}" for n, c in sorted(nodes.items()))
              + f"  (params_file:={manifest['params_files'][rig]})")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="g2g-weights",
        description="Download (or take from --from), verify and convert the official G2G "
                    "release: ten G2G-only .pth files and their MapAnything v1.0.1 backbone.")
    parser.add_argument("--out", default="weights/g2g",
                        help="output folder: converted checkpoints, manifest.json, "
                             "params_<rig>.yaml (default weights/g2g)")
    parser.add_argument("--from", dest="source",
                        help="a release folder downloaded by hand (no network is used)")
    parser.add_argument("--repo", default=HUB_REPO, help=f"hub repository (default {HUB_REPO})")
    parser.add_argument("--revision", default="main", help="hub revision (default main)")
    parser.add_argument("--endpoint", help="hub URL (default $HF_ENDPOINT or huggingface.co)")
    names = sorted(w.name for w in RELEASED.values())
    parser.add_argument("--only", nargs="+", choices=names, metavar="NAME",
                        help=f"convert only these (default: all ten: {', '.join(names)})")
    parser.add_argument("--force", action="store_true", help="overwrite converted checkpoints")
    parser.add_argument("--show", metavar="DIR", help="print the manifest in DIR and exit")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="g2g-weights: %(message)s")
    try:
        if args.show:
            return _show(args.show)
        out = pathlib.Path(args.out)
        wanted = [n + ".pth" for n in args.only] if args.only else sorted(RELEASED)
        if args.source:
            source = pathlib.Path(args.source)
            if not source.is_dir():
                raise ValueError(f"--from {source}: not a folder")
            info = {"kind": "folder", "path": str(source.resolve())}
        else:
            source = out / "download"
            info = download_release(args.repo, args.revision, source, wanted, args.endpoint)
        manifest = prepare_release(source, out, info, force=args.force, only=args.only)
    except ValueError as exc:
        print(f"g2g-weights: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(manifest['checkpoints'])} checkpoints and {out / MANIFEST_NAME}")
    return _show(str(out))


if __name__ == "__main__":
    sys.exit(main())
