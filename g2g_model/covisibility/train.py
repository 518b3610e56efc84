"""Training loop of the covisibility decoder over cached-token samples.

AdamW, linear warm-up then cosine decay, gradient-norm clipping, optional bf16 autocast. Each
step draws its batch from a generator seeded by (seed, step), so a resumed run sees exactly the
batches of an uninterrupted one. Writes into ``out_dir``:

* ``log.csv``: one row per ``log_every`` steps (and per evaluation), appended on resume;
* ``last.safetensors``: weights + optimizer state every ``checkpoint_every`` steps and at the
  end (resumed from when present and ``resume`` is set);
* ``covisibility.safetensors``: the final weights only (what is shipped and loaded at run time).
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import math
import pathlib
import time
from typing import Dict, Optional

import torch
from tqdm import tqdm

from g2g_model.covisibility.checkpoint import load_checkpoint, save_checkpoint
from g2g_model.covisibility.evaluate import evaluate
from g2g_model.covisibility.loss import CovisibilityLossConfig, covisibility_loss
from g2g_model.covisibility.model import CovisibilityDecoder
from g2g_model.precision import autocast

LOG = logging.getLogger(__name__)

LAST_CHECKPOINT = "last.safetensors"
FINAL_CHECKPOINT = "covisibility.safetensors"
LOG_COLUMNS = ("step", "loss", "dense", "scalar", "lr", "elapsed_s", "val_ratio_mae",
               "val_score_mae", "val_dense_iou", "val_retrieval_top1", "val_retrieval_top5")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings (``eval_every = 0``: evaluate only at the end)."""

    steps: int = 20_000
    batch_size: int = 64
    lr: float = 3e-4
    weight_decay: float = 0.01
    warmup_steps: int = 500
    grad_clip: float = 1.0
    log_every: int = 50
    eval_every: int = 0
    checkpoint_every: int = 1000
    seed: int = 0
    bf16: bool = False
    loss: CovisibilityLossConfig = CovisibilityLossConfig()

    def __post_init__(self):
        for name in ("steps", "batch_size", "log_every", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "eval_every", "weight_decay", "grad_clip"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")

    def to_dict(self) -> Dict:
        return dataclasses.asdict(self)


TRAIN_PRESETS: Dict[str, TrainConfig] = {
    "default": TrainConfig(),
    # Quick runs: tests, smoke checks, the synthetic task.
    # A CPU budget of ~15-20 min on 2 shared cores (the shipped sim decoder, cpu_fast).
    "cpu_short": TrainConfig(steps=3000, batch_size=64, lr=1e-3, warmup_steps=100,
                             log_every=25, checkpoint_every=250),
    "smoke": TrainConfig(steps=300, batch_size=64, lr=1e-3, warmup_steps=20, log_every=25,
                         checkpoint_every=100),
}


def lr_at(step: int, config: TrainConfig) -> float:
    """Linear warm-up over ``warmup_steps`` then cosine decay to 0 at ``steps``."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    span = max(1, config.steps - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    return config.lr * 0.5 * (1 + math.cos(math.pi * progress))


def batch_indices(num_samples: int, batch_size: int, step: int, seed: int) -> torch.Tensor:
    """The sample indices of one step, a pure function of (seed, step)."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    if batch_size <= num_samples:
        return torch.randperm(num_samples, generator=gen)[:batch_size]
    return torch.randint(num_samples, (batch_size,), generator=gen)


def _get_batch(dataset, idx: torch.Tensor) -> Dict[str, torch.Tensor]:
    if hasattr(dataset, "batch"):
        return dataset.batch(idx)
    items = [dataset[int(i)] for i in idx]
    return {k: torch.stack([torch.as_tensor(it[k]) for it in items]).float() for k in items[0]}


def train_covisibility(
    model: CovisibilityDecoder,
    train_set,
    out_dir,
    config: TrainConfig = TrainConfig(),
    val_set=None,
    encoder: Optional[Dict] = None,
    preset: str = "",
    resume: bool = True,
    progress: bool = True,
    stop_at: Optional[int] = None,
) -> Dict:
    """Train ``model`` in place.

    Args:
        model: the decoder (its config must match a checkpoint being resumed).
        train_set: samples with ``batch(indices)`` (:class:`CovisibilitySamples`) or any
            indexable set of dicts with ``tokens_a, tokens_b [P, D]``, ``dense_a, dense_b
            [h, w]``, ``r_ab, r_ba`` scalars.
        out_dir: directory for the log and checkpoints.
        config: :class:`TrainConfig`.
        val_set: held-out samples (:class:`CovisibilitySamples`) evaluated every
            ``eval_every`` steps and at the end.
        encoder: ``{"name", "config_hash"}`` of the token encoder (default: ``train_set``'s).
        preset: decoder preset name, recorded in the checkpoint.
        resume: continue from ``out_dir/last.safetensors`` when it exists.
        progress: show a tqdm progress bar.
        stop_at: end after this step as if interrupted (``last.safetensors`` is written, the
            final checkpoint is not), e.g. to split a run over time-limited jobs.
    Returns:
        ``{"step", "loss", "checkpoint", "val": metrics or None}``.
    """
    if len(train_set) == 0:
        raise ValueError("train_set is empty")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    encoder = encoder if encoder is not None else dict(getattr(train_set, "encoder", {}) or {})
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(0.9, 0.999),
                                  weight_decay=config.weight_decay)
    start = 0
    resumed_metrics = None
    last = out / LAST_CHECKPOINT
    if resume and last.exists():
        _, meta = load_checkpoint(last, model=model, expect_encoder=encoder or None,
                                  optimizer=optimizer)
        start = int(meta["step"])
        resumed_metrics = meta.get("metrics") or None
        LOG.info("resuming covisibility training from %s at step %d", last, start)
    log_path = out / "log.csv"
    new_log = not (log_path.exists() and start > 0)
    record = {"encoder": encoder, "preset": preset, "extra": {"train": config.to_dict()}}

    def save(path, step, with_optimizer, metrics=None):
        save_checkpoint(path, model, step=step, encoder=record["encoder"],
                        preset=record["preset"], metrics=metrics,
                        optimizer=optimizer if with_optimizer else None,
                        extra=record["extra"])

    dtype = torch.bfloat16 if config.bf16 else None
    t0 = time.monotonic()
    loss_val, parts = float("nan"), {}
    val_metrics = resumed_metrics
    with open(log_path, "w" if new_log else "a", newline="") as fh, \
            tqdm(total=config.steps, initial=start, disable=not progress,
                 desc="covisibility", dynamic_ncols=True) as bar:
        writer = csv.DictWriter(fh, fieldnames=LOG_COLUMNS)
        if new_log:
            writer.writeheader()
        model.train()
        end = config.steps if stop_at is None else min(config.steps, stop_at)
        for step in range(start, end):
            lr = lr_at(step, config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch = {k: v.to(device) for k, v in
                     _get_batch(train_set, batch_indices(len(train_set), config.batch_size,
                                                         step, config.seed)).items()}
            with autocast(device, dtype, inherit=True):
                pred = model(batch["tokens_a"], batch["tokens_b"], dense=True)
            loss, parts = covisibility_loss(pred, batch, config.loss)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            loss_val = float(loss.detach())
            done = step + 1
            row = None
            if done % config.log_every == 0 or done == config.steps:
                row = {"step": done, "loss": f"{loss_val:.6f}", "dense": f"{parts['dense']:.6f}",
                       "scalar": f"{parts['scalar']:.6f}", "lr": f"{lr:.3e}",
                       "elapsed_s": f"{time.monotonic() - t0:.1f}"}
                bar.set_postfix(loss=f"{loss_val:.4f}", scalar=f"{parts['scalar']:.4f}")
            is_eval = val_set is not None and (
                done == config.steps or (config.eval_every and done % config.eval_every == 0))
            if is_eval:
                val_metrics = evaluate(model, val_set, batch_size=max(config.batch_size, 128),
                                       bf16=config.bf16)
                model.train()
                row = row or {"step": done}
                row.update({f"val_{k}": f"{val_metrics[k]:.6f}" for k in
                            ("ratio_mae", "score_mae", "dense_iou", "retrieval_top1",
                             "retrieval_top5")})
                LOG.info("step %d validation: %s", done, val_metrics)
            if row is not None:
                writer.writerow(row)
                fh.flush()
            if done % config.checkpoint_every == 0 or done in (config.steps, end):
                save(last, done, with_optimizer=True, metrics=val_metrics)
            bar.update(1)
    if end < config.steps:
        LOG.info("stopped at step %d of %d; resume from %s", end, config.steps, last)
        return {"step": end, "loss": loss_val, "checkpoint": str(last), "val": val_metrics}
    final = out / FINAL_CHECKPOINT
    save(final, config.steps, with_optimizer=False, metrics=val_metrics)
    LOG.info("covisibility training done: step %d loss %.4f -> %s", config.steps, loss_val,
             final)
    return {"step": config.steps, "loss": loss_val, "checkpoint": str(final), "val": val_metrics}
