"""Our checkpoint format: one ``.safetensors`` file, self-describing through its metadata.

Layout:

* tensors: the :class:`G2GModel` state dict under its own names, plus optionally the backbone's
  state dict under the ``backbone.`` prefix (for a backbone trained here, e.g. ``compact``);
* metadata key ``"g2g"``: a JSON header::

      {"format": "g2g-checkpoint", "format_version": 1,
       "preset": "paper" | "small" | "tiny" | null,
       "config": {... every G2GConfig field ...},
       "backbone": {"name": "mapanything_v1" | ..., "config": {...}, "weights_included": bool},
       "training": {... free-form JSON: steps, dataset, source file, metrics ...},
       "tensors": {"g2g": <count>, "backbone": <count>, "sha256": <digest>},
       "library": "g2g_model <version>"}

Loading builds the model from the header's config, checks every key and shape, and only then
copies weights; a caller that expects a particular configuration or format version gets a
``ValueError`` naming every differing field. Unreadable, truncated or foreign files give a
``ValueError`` saying so; the tensor digest in the header catches corrupted weight bytes.
:func:`load_any` also accepts the official releases.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

import torch

from g2g_model import __version__
from g2g_model.model.config import G2GConfig, preset_name_of
from g2g_model.model.g2g import G2GModel
from g2g_model.model.official import (
    BACKBONE_PREFIX,
    is_safetensors,
    load_official,
    load_state_dict_strictly,
)

LOG = logging.getLogger(__name__)

FORMAT_NAME = "g2g-checkpoint"
FORMAT_VERSION = 1
HEADER_KEY = "g2g"


@dataclass
class LoadedCheckpoint:
    """What :func:`load_checkpoint` / :func:`load_any` return."""

    model: G2GModel
    header: Dict[str, Any]
    backbone_state_dict: Dict[str, torch.Tensor] = field(default_factory=dict)


def build_header(
    config: G2GConfig,
    preset_name: Optional[str] = None,
    backbone_name: Optional[str] = None,
    backbone_config: Optional[Mapping[str, Any]] = None,
    training: Optional[Mapping[str, Any]] = None,
    backbone_weights_included: bool = False,
) -> Dict[str, Any]:
    """The JSON header for ``config``; the preset name is detected when not given."""
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "preset": preset_name if preset_name is not None else preset_name_of(config),
        "config": config.to_dict(),
        "backbone": {
            "name": backbone_name,
            "config": dict(backbone_config or {}),
            "weights_included": backbone_weights_included,
        },
        "training": dict(training or {}),
        "library": f"g2g_model {__version__}",
    }


def save_checkpoint(
    path: str | os.PathLike,
    model: G2GModel,
    preset_name: Optional[str] = None,
    backbone_name: Optional[str] = None,
    backbone_config: Optional[Mapping[str, Any]] = None,
    training: Optional[Mapping[str, Any]] = None,
    backbone_state_dict: Optional[Mapping[str, torch.Tensor]] = None,
) -> Dict[str, Any]:
    """Write ``model`` (and optionally the backbone weights) to ``path``; returns the header.

    The file is written to a temporary name and renamed, so a crash never leaves a partial
    checkpoint under ``path``.
    """
    from safetensors.torch import save_file

    backbone_state_dict = dict(backbone_state_dict or {})
    header = build_header(model.config, preset_name, backbone_name, backbone_config, training,
                          backbone_weights_included=bool(backbone_state_dict))
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    for key, value in backbone_state_dict.items():
        tensors[BACKBONE_PREFIX + key] = value.detach().cpu().contiguous()
    header["tensors"] = {"g2g": len(tensors) - len(backbone_state_dict),
                         "backbone": len(backbone_state_dict),
                         "sha256": tensors_digest(tensors)}
    try:
        text = json.dumps(header, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"checkpoint header is not JSON-serialisable: {exc}") from exc

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".safetensors", dir=directory)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={HEADER_KEY: text})
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    LOG.info("saved G2G checkpoint %s (%d tensors)", path, len(tensors))
    return header


def tensors_digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over names, dtypes, shapes and bytes of ``tensors`` in sorted-name order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _read(path: str, header_only: bool = False) -> tuple:
    """``(metadata, tensors)`` read into memory, never memory-mapped (a checkpoint replaced or
    truncated by someone else while mapped would kill the process with SIGBUS)."""
    from g2g_model.tagged_safetensors import (
        SafetensorsReadError, read_safetensors, read_safetensors_metadata,
    )

    if not os.path.isfile(path):
        raise ValueError(f"checkpoint {path!r} does not exist")
    try:
        if header_only:
            return read_safetensors_metadata(path), {}
        return read_safetensors(path)
    except (OSError, SafetensorsReadError) as exc:  # all mean "unreadable"
        raise ValueError(
            f"{path!r} is not a readable safetensors file (corrupt or truncated?): {exc}"
        ) from exc


def read_header(path: str | os.PathLike) -> Dict[str, Any]:
    """Parse and validate the JSON header of one of our checkpoints (tensors are not read)."""
    path = os.fspath(path)
    metadata, _ = _read(path, header_only=True)
    return _parse_header(path, metadata)


def _parse_header(path: str, metadata: Mapping[str, str]) -> Dict[str, Any]:
    if HEADER_KEY not in metadata:
        raise ValueError(
            f"{path!r} has no {HEADER_KEY!r} header: it is not a G2G checkpoint (official "
            "weights are read by load_any or converted with g2g-convert)"
        )
    try:
        header = json.loads(metadata[HEADER_KEY])
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path!r}: the checkpoint header is not valid JSON: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise ValueError(f"{path!r}: header format is not {FORMAT_NAME!r}")
    for name, kind in (("format_version", int), ("config", dict)):
        if not isinstance(header.get(name), kind):
            raise ValueError(f"{path!r}: header field {name!r} is missing or malformed")
    return header


def _check_expectations(path: str, header: Mapping[str, Any], config: G2GConfig,
                        expected_config: Optional[G2GConfig], expected_version: Optional[int],
                        expected_backbone: Optional[str]) -> None:
    problems = []
    if expected_version is not None and header["format_version"] != expected_version:
        problems.append(
            f"format_version: checkpoint {header['format_version']}, expected {expected_version}"
        )
    if expected_config is not None:
        for name, (mine, theirs) in config.differences(expected_config).items():
            problems.append(f"config.{name}: checkpoint {mine!r}, expected {theirs!r}")
    backbone = (header.get("backbone") or {}).get("name")
    if expected_backbone is not None and backbone != expected_backbone:
        problems.append(f"backbone.name: checkpoint {backbone!r}, expected {expected_backbone!r}")
    if problems:
        raise ValueError(f"checkpoint {path!r} does not match: " + "; ".join(problems))


def _read_tensors(path: str) -> tuple:
    metadata, tensors = _read(path)
    header = _parse_header(path, metadata)
    expected = (header.get("tensors") or {}).get("sha256")
    if expected is not None and tensors_digest(tensors) != expected:
        raise ValueError(f"{path!r}: tensor checksum mismatch, the file is corrupt")
    return header, tensors


def _split(tensors: Mapping[str, torch.Tensor]) -> tuple:
    g2g = {k: v for k, v in tensors.items() if not k.startswith(BACKBONE_PREFIX)}
    backbone = {k[len(BACKBONE_PREFIX):]: v for k, v in tensors.items()
                if k.startswith(BACKBONE_PREFIX)}
    return g2g, backbone


def load_checkpoint(
    path: str | os.PathLike,
    expected_config: Optional[G2GConfig] = None,
    expected_version: Optional[int] = FORMAT_VERSION,
    expected_backbone: Optional[str] = None,
) -> LoadedCheckpoint:
    """Build the model described by the header and load its weights strictly.

    Args:
        path: a checkpoint written by :func:`save_checkpoint`.
        expected_config: if given, every differing config field is an error.
        expected_version: the format version this code reads (None accepts any).
        expected_backbone: if given, the header's backbone name must equal it.
    """
    path = os.fspath(path)
    header, tensors = _read_tensors(path)
    try:
        config = G2GConfig.from_dict(header["config"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path!r}: invalid config in the checkpoint header: {exc}") from exc
    _check_expectations(path, header, config, expected_config, expected_version,
                        expected_backbone)
    g2g, backbone = _split(tensors)
    model = G2GModel(config)
    load_state_dict_strictly(model, g2g, source=f"checkpoint {path!r}")
    return LoadedCheckpoint(model=model, header=header, backbone_state_dict=backbone)


def load_checkpoint_into(model: G2GModel, path: str | os.PathLike,
                         expected_version: Optional[int] = FORMAT_VERSION) -> Dict[str, Any]:
    """Load a checkpoint into an existing model whose config must equal the header's.

    Nothing is copied unless the version, every config field, every key and every shape match.
    Returns the header.
    """
    path = os.fspath(path)
    header, tensors = _read_tensors(path)
    try:
        config = G2GConfig.from_dict(header["config"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path!r}: invalid config in the checkpoint header: {exc}") from exc
    _check_expectations(path, header, config, model.config, expected_version, None)
    g2g, _ = _split(tensors)
    load_state_dict_strictly(model, g2g, source=f"checkpoint {path!r}")
    return header


def load_any(
    path: str | os.PathLike,
    expected_config: Optional[G2GConfig] = None,
    max_frames: Optional[int] = None,
    num_heads: Optional[int] = None,
) -> LoadedCheckpoint:
    """Load our checkpoint, or an official release (``.pth`` / flat ``.safetensors``).

    Official files carry no config: it is ``expected_config`` if given, else inferred from the
    tensor shapes (``num_heads`` defaults to the released 8). The returned header then has
    ``"format": "official"`` and the config used.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"weights file {path!r} does not exist")
    ours = False
    if is_safetensors(path):
        ours = HEADER_KEY in _read(path, header_only=True)[0]
    if ours:
        loaded = load_checkpoint(path, expected_config=expected_config)
        frames = loaded.model.config.max_frames
        if max_frames is not None and frames != max_frames:
            raise ValueError(f"checkpoint {path!r} has max_frames={frames}, "
                             f"expected {max_frames}")
        return loaded
    model = load_official(path, config=expected_config, max_frames=max_frames,
                          num_heads=num_heads)
    training = {"source": "official", "source_file": os.path.basename(path),
                # The packed attention weights do not reveal the head count.
                "num_heads_assumed": expected_config is None and num_heads is None}
    header = build_header(model.config, training=training)
    header["format"] = "official"
    return LoadedCheckpoint(model=model, header=header)


OFFICIAL_BACKBONE = "mapanything_v1"  # the released G2G weights sit on MapAnything V1 features


def sha256_of(path: str) -> str:
    """SHA-256 of a file's bytes (hex), read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def convert_official(src: str, dst: str, max_frames: Optional[int] = None,
                     num_heads: Optional[int] = None,
                     backbone_name: str = OFFICIAL_BACKBONE) -> dict:
    """Convert an official G2G ``.pth`` into our checkpoint; returns the written header."""
    loaded = load_any(src, max_frames=max_frames, num_heads=num_heads)
    if loaded.header.get("format") != "official":
        raise ValueError(f"{src!r} is already a G2G checkpoint; nothing to convert")
    training = {"source": "official", "source_file": os.path.basename(src),
                "source_sha256": sha256_of(src)}
    return save_checkpoint(dst, loaded.model, backbone_name=backbone_name, training=training)
