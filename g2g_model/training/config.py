"""Training configuration: nested dataclasses filled from named YAML presets in ``configs/``.

A preset is a YAML file ``configs/<name>.yaml`` (or any path). :func:`load_config` reads it,
applies ``section.key=value`` overrides and checks every field, so that a typo, an unknown
backbone / G2G preset or a missing dataset path is a ``ValueError`` before any work starts.

A preset may start from another with ``base: <preset name or path>`` (a path relative to the
preset's own folder) and state only what differs: sections are merged key by key, the preset's
values win (a mapping value such as ``model.g2g_overrides`` is replaced whole), and bases may
chain (a cycle is a ``ValueError``).

Tasks:
    ``pretrain``: stage 1 of the compact backbone (single groups, depth + hidden relative poses).
    ``reloc``: G2G on temporal window pairs (mined index with overlap scores).
    ``rig``: G2G on spatial rig groups (rig-pairs index: all cameras at two times).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import yaml

TASKS = ("pretrain", "reloc", "rig")
CONFIG_DIR_NAME = "configs"


@dataclass
class DataConfig:
    """Where the training data is.

    Attributes:
        root: collection root (the directory given to ``g2g-sim --out``).
        index: pair index relative to ``root`` (reloc: ``pairs_w5.json``; rig:
            ``rig_pairs.csv``); unused by ``pretrain``.
        max_pairs: keep at most this many pairs (a seeded random subset; 0 = all).
        min_score: drop pairs whose overlap score is below (reloc only).
        group_size: frames per group for ``pretrain`` (windows of one camera).
        frame_stride: frame step inside a pretraining window.
        rig_group_fraction: share of pretraining groups that are rig groups (all cameras at one
            time) instead of temporal windows.
        reverse_fraction: share of the pairs (seeded) with A and B exchanged (reloc and rig).
    """

    root: str = ""
    index: str = ""
    max_pairs: int = 0
    min_score: float = 0.0
    group_size: int = 5
    frame_stride: int = 2
    rig_group_fraction: float = 0.3
    reverse_fraction: float = 0.0


@dataclass
class ModelConfig:
    """Backbone + G2G modules.

    Attributes:
        backbone: registry name (``compact``, ``mapanything_v1``).
        backbone_preset: preset of the backbone (compact: ``compact_s``, ``compact_xs``).
        backbone_overrides: field overrides of the backbone preset (e.g. ``image_size``).
        backbone_weights: weights file of the backbone (compact: a stage-1 checkpoint; empty:
            random init, only sensible for ``pretrain``).
        g2g_preset: ``paper`` / ``small`` / ``tiny``.
        g2g_overrides: G2GConfig field overrides (``max_frames``, ``cross_group_attention``).
        init_from: a G2G checkpoint (ours) to start from, e.g. the reloc model for ``rig``.
        freeze: module name patterns frozen in the combined model (``backbone``).
    """

    backbone: str = "compact"
    backbone_preset: str = "compact_s"
    backbone_overrides: Dict[str, Any] = field(default_factory=dict)
    backbone_weights: str = ""
    g2g_preset: str = "small"
    g2g_overrides: Dict[str, Any] = field(default_factory=dict)
    init_from: str = ""
    freeze: List[str] = field(default_factory=lambda: ["backbone"])


@dataclass
class OptimConfig:
    """AdamW and the learning-rate schedule (ARCHITECTURE §2)."""

    lr: float = 1e-4
    betas: List[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.01
    grad_clip: float = 5.0
    batch_size: int = 8
    warmup_steps: int = 1000
    decay_steps: int = 2000
    max_steps: int = 0          # hard cap on all phases (0: none)


@dataclass
class CurriculumConfig:
    """Three-phase overlap curriculum (see :mod:`g2g_model.training.curriculum`)."""

    enabled: bool = True
    start: float = 0.5
    stop: float = 0.1
    step: float = 0.05
    window: int = 200
    rot_threshold: float = 0.02
    trans_threshold: float = 0.15
    max_steps_per_level: int = 0  # 0: wait for the gate; else advance after this many steps


@dataclass
class CacheConfig:
    """Frozen-backbone feature caching (reloc / rig).

    Attributes:
        enabled: precompute features of every training group once and train on them.
        dir: where the .safetensors shards go (default ``<out_dir>/features``).
        noise_variants: cached versions of each group: variant 0 has clean input poses, the
            others one fixed draw of the extrinsic noise each (the augmentation then picks a
            variant per step instead of drawing fresh noise).
        dtype: storage dtype of the features (``float16`` or ``float32``).
    """

    enabled: bool = False
    dir: str = ""
    noise_variants: int = 2
    dtype: str = "float16"


@dataclass
class TrainConfig:
    """One training run."""

    task: str = "reloc"
    out_dir: str = "outputs/run"
    seed: int = 0
    device: str = "cpu"
    bf16: Any = "auto"
    noise: str = "g2g"
    loss: str = "g2g"
    log_every: int = 10
    checkpoint_every: int = 200
    num_workers: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


_SECTIONS = {"data": DataConfig, "model": ModelConfig, "optim": OptimConfig,
             "curriculum": CurriculumConfig, "cache": CacheConfig}


def _fill(cls, values: Mapping[str, Any], where: str):
    if not isinstance(values, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {type(values).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; known: {sorted(known)}")
    out = dict(values)
    for f in dataclasses.fields(cls):
        if f.name in out and str(f.type) in ("float", "int"):
            out[f.name] = _number(out[f.name], str(f.type), f"{where}.{f.name}")
    return out


def _number(value: Any, kind: str, where: str):
    """A float / int field's value; YAML 1.1 reads ``1e-4`` (no dot) as text, accepted here."""
    if isinstance(value, bool):
        raise ValueError(f"{where}: expected a number, got {value!r}")
    if kind == "float" and isinstance(value, (int, float)):
        return float(value)
    if kind == "int" and isinstance(value, int):
        return value
    if kind == "float" and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(f"{where}: expected {'a number' if kind == 'float' else 'an integer'}, "
                     f"got {value!r}")


def config_from_dict(values: Mapping[str, Any], where: str = "config") -> TrainConfig:
    """Build a :class:`TrainConfig`; unknown keys raise ``ValueError`` naming them."""
    top = _fill(TrainConfig, values, where)
    for name, cls in _SECTIONS.items():
        top[name] = cls(**_fill(cls, top.get(name) or {}, f"{where}.{name}"))
    return TrainConfig(**top)


def preset_dirs() -> List[Path]:
    """Directories searched for named presets: ``./configs`` then the repository's."""
    repo = Path(__file__).resolve().parents[2] / CONFIG_DIR_NAME
    return [Path.cwd() / CONFIG_DIR_NAME, repo]


def available_presets() -> List[str]:
    names = set()
    for d in preset_dirs():
        if d.is_dir():
            names.update(p.stem for p in d.glob("*.yaml"))
    return sorted(names)


def resolve_preset(name_or_path: str) -> Path:
    """A YAML path, or the file of a named preset; ``ValueError`` listing the presets."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise ValueError(f"config file {path} does not exist")
        return path
    for d in preset_dirs():
        candidate = d / f"{name_or_path}.yaml"
        if candidate.is_file():
            return candidate
    raise ValueError(f"unknown training preset {name_or_path!r}; presets: {available_presets()}")


def _parse_value(text: str) -> Any:
    return yaml.safe_load(text)


def apply_overrides(values: Dict[str, Any], overrides: List[str]) -> Dict[str, Any]:
    """Apply ``a.b=value`` strings (values parsed as YAML) to a nested dict, in place."""
    for item in overrides or []:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value")
        key, text = item.split("=", 1)
        parts = key.strip().split(".")
        node = values
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"override {item!r}: {part!r} is not a section")
        node[parts[-1]] = _parse_value(text)
    return values


def _merge(base: Dict[str, Any], top: Mapping[str, Any]) -> Dict[str, Any]:
    """``top`` over ``base``: sections merged key by key; a value, even a mapping such as
    ``model.g2g_overrides``, replaced whole (so a preset can drop an override of its base)."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def read_preset(name_or_path: str, _seen: Optional[List[Path]] = None) -> Dict[str, Any]:
    """The values of a preset with its ``base:`` chain resolved (no overrides, no checks)."""
    path = resolve_preset(name_or_path)
    seen = list(_seen or [])
    if path.resolve() in seen:
        chain = " -> ".join(str(p) for p in seen + [path.resolve()])
        raise ValueError(f"preset bases form a cycle: {chain}")
    try:
        values = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(values, dict):
        raise ValueError(f"{path}: a preset must be a mapping of sections")
    base = values.pop("base", None)
    if base is None:
        return values
    if not isinstance(base, str) or not base:
        raise ValueError(f"{path}: base must be a preset name or a YAML path, got {base!r}")
    if Path(base).suffix in (".yaml", ".yml") and not Path(base).is_absolute():
        base = str(path.parent / base)
    try:
        parent = read_preset(base, seen + [path.resolve()])
    except ValueError as exc:
        raise ValueError(f"{path}: base {base!r}: {exc}") from exc
    return _merge(parent, values)


def load_config(name_or_path: str, overrides: Optional[List[str]] = None) -> TrainConfig:
    """Read a preset (name or YAML path, ``base:`` resolved), apply overrides, validate."""
    path = resolve_preset(name_or_path)
    values = apply_overrides(read_preset(name_or_path), overrides or [])
    config = config_from_dict(values, where=str(path))
    validate(config)
    return config


def validate(config: TrainConfig) -> TrainConfig:
    """Every check that can fail before work starts; ``ValueError`` naming the field."""
    from g2g_model.training.augment import NOISE_PRESETS
    from g2g_model.backbones.base import registered_backbones
    from g2g_model.training.losses import LOSS_PRESETS
    from g2g_model.model.config import PRESETS

    if config.task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {config.task!r}")
    if config.model.backbone not in registered_backbones():
        raise ValueError(f"model.backbone: unknown backbone {config.model.backbone!r}; "
                         f"registered: {registered_backbones()}")
    if config.model.backbone == "compact":
        from g2g_model.backbones.compact_config import compact_config

        compact_config(config.model.backbone_preset, **config.model.backbone_overrides)
    if config.task != "pretrain":
        if config.model.g2g_preset not in PRESETS:
            raise ValueError(f"model.g2g_preset: unknown G2G preset "
                             f"{config.model.g2g_preset!r}; presets: {sorted(PRESETS)}")
        if config.noise not in NOISE_PRESETS:
            raise ValueError(f"noise: unknown preset {config.noise!r}; "
                             f"presets: {sorted(NOISE_PRESETS)}")
        if config.loss not in LOSS_PRESETS:
            raise ValueError(f"loss: unknown preset {config.loss!r}; "
                             f"presets: {sorted(LOSS_PRESETS)}")
    root = Path(config.data.root)
    if not config.data.root or not root.is_dir():
        raise ValueError(f"data.root: dataset path {config.data.root!r} is not a directory")
    if config.task != "pretrain":
        index = root / config.data.index
        if not config.data.index or not index.is_file():
            raise ValueError(f"data.index: pair index {str(index)!r} does not exist")
    if config.task != "pretrain" and not config.model.backbone_weights:
        raise ValueError("model.backbone_weights is required: G2G trains on a frozen, already "
                         "trained backbone (a stage-1 compact checkpoint or external weights)")
    for name in ("backbone_weights", "init_from"):
        value = getattr(config.model, name)
        if value and not Path(value).is_file():
            raise ValueError(f"model.{name}: file {value!r} does not exist")
    if config.num_workers < 0:
        raise ValueError(f"num_workers must be >= 0 (image-loading threads), got "
                         f"{config.num_workers}")
    if config.optim.batch_size < 1:
        raise ValueError(f"optim.batch_size must be >= 1, got {config.optim.batch_size}")
    if config.optim.warmup_steps < 0 or config.optim.decay_steps < 0:
        raise ValueError("optim.warmup_steps and optim.decay_steps must be >= 0")
    if config.cache.noise_variants < 1:
        raise ValueError(f"cache.noise_variants must be >= 1, got {config.cache.noise_variants}")
    if config.cache.dtype not in ("float16", "float32"):
        raise ValueError(f"cache.dtype must be float16 or float32, got {config.cache.dtype!r}")
    if config.task == "pretrain" and config.cache.enabled:
        raise ValueError("cache.enabled: the pretraining task trains the backbone, it cannot "
                         "use cached features")
    return config
