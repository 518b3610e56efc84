"""The training loop of ``g2g-train``: stage-1 pretraining and G2G training (reloc / rig).

Recipe (ARCHITECTURE §2): AdamW (betas 0.9 / 0.999, weight decay 0.01), gradient-norm clip 5,
linear warm-up, the three-phase overlap curriculum (:mod:`curriculum`), cosine decay, extrinsic
input-noise augmentation, frozen backbone (frozen by name) with optional cached features.

Determinism and resume. Every random draw of a step (noise, cached noise variant, hidden poses of
stage 1) comes from a generator seeded by ``(seed, rank, step)``, and the data order from the
resumable :class:`CurriculumSampler`; the saved state (``<out_dir>/state.pt``: trainable weights,
optimizer, curriculum, sampler, step) therefore lets a killed run continue from its last
checkpoint and end with the weights of an uninterrupted run.

DDP. Under ``torchrun`` (WORLD_SIZE > 1) the trainable module is wrapped in
``DistributedDataParallel``; every rank draws its own shard of each epoch; the curriculum gate
uses losses averaged over ranks so that all ranks take the same decisions; rank 0 writes logs and
checkpoints.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch
from tqdm import tqdm

from g2g_model.training.augment import NOISE_PRESETS, perturb_group_poses
from g2g_model.training.freeze import freeze_modules
from g2g_model.precision import bf16_is_fast
from g2g_model.training.losses import LOSS_PRESETS
from g2g_model.precision import autocast
from g2g_model.training import distributed as ddp
from g2g_model.training.config import TrainConfig, validate
from g2g_model.training.curriculum import OverlapCurriculum
from g2g_model.training.logs import CsvLog, plot_training
from g2g_model.training.models import (
    G2GWithBackbone,
    build_backbone,
    build_g2g,
    strip_ddp,
    trainable_parameters,
)
from g2g_model.training.run_files import (
    LOG_FILE, PLOT_FILE, STATE_FILE, check_resume_config, check_resume_inputs, export_model,
    input_digests, restore_rng_state, rng_state,
)
from g2g_model.training.sampler import CurriculumSampler, bucket_members
from g2g_model.training.task_modules import PairTrainModule, pretrain_task, step_generator
from g2g_model.training.trajectory_groups import TrajectoryStore, group_key

logger = logging.getLogger(__name__)


class Trainer:
    """One training run (see the module docstring).

    Args:
        config: a validated :class:`TrainConfig`.
        resume: continue from ``<out_dir>/state.pt`` when it exists.
        progress: show tqdm bars (rank 0).
        stop_after: stop after this many steps of this invocation WITHOUT a final checkpoint
            (simulates a kill; for tests).
        trace: record the dataset indices of every step in ``self.seen`` (for tests).
    """

    def __init__(self, config: TrainConfig, resume: bool = True, progress: bool = True,
                 stop_after: Optional[int] = None, trace: bool = False) -> None:
        validate(config)
        self.config = config
        self.inputs = input_digests(config.model)   # sha256 of the weight files it starts from
        self.resume = resume
        self.stop_after = stop_after
        self.trace = trace
        self.seen: List[List[int]] = []
        self.seconds_before = 0.0  # training time of earlier invocations (from state.pt)
        self._t_start: Optional[float] = None
        self.info = ddp.init_distributed(config.device)
        self.device = ddp.device_for(config.device, self.info)
        self.progress = progress and self.info.is_main
        self.out = Path(config.out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.bf16 = bf16_is_fast(self.device) if config.bf16 == "auto" else bool(config.bf16)
        torch.manual_seed(config.seed)  # identical initial weights on every rank
        self._build()

    # ------------------------------------------------------------------ set-up
    def _build(self) -> None:
        cfg = self.config
        self.backbone = build_backbone(cfg.model)
        image_size = tuple(self.backbone.image_size)
        self.store = TrajectoryStore(cfg.data.root, image_size, workers=cfg.num_workers)
        if cfg.task == "pretrain":
            self.module, self.dataset, self.samplers = pretrain_task(
                cfg, self.backbone, self.store, self.info.rank, self.info.world_size)
            self.module.to(self.device)
            self.g2g = None
        else:
            from g2g_model.training.pair_dataset import PairDataset, read_pairs

            self.g2g = build_g2g(cfg.model, self.backbone)
            combined = G2GWithBackbone(self.backbone, self.g2g)
            if cfg.model.freeze:
                freeze_modules(combined, cfg.model.freeze)
            if cfg.cache.enabled and any(p.requires_grad for p in self.backbone.parameters()):
                raise ValueError("cache.enabled needs a frozen backbone (model.freeze must "
                                 "include 'backbone')")
            if any(p.requires_grad for p in self.backbone.parameters()):
                raise ValueError("joint fine-tuning of the backbone is not supported by this "
                                 "trainer; keep 'backbone' in model.freeze")
            self.backbone.to(self.device)
            items = read_pairs(cfg.task, cfg.data.root, cfg.data.index, cfg.data.min_score,
                               cfg.data.max_pairs, cfg.seed, cfg.data.reverse_fraction)
            self.dataset = PairDataset(items, self.store)
            self.targets = [self.dataset.targets(i) for i in range(len(self.dataset))]
            self.module = PairTrainModule(self.g2g, LOSS_PRESETS[cfg.loss]).to(self.device)
            self.noise = NOISE_PRESETS[cfg.noise]
            # A batch stacks its groups: pairs of other group sizes (4- and 5-camera rigs)
            # go into separate batches.
            self.pair_sizes = [(len(ta), len(tb)) for ta, tb in self.targets]
            self.samplers = {"pairs": CurriculumSampler(self.dataset.scores, cfg.optim.batch_size,
                                                        self.info.rank, self.info.world_size,
                                                        cfg.seed, buckets=self.pair_sizes)}
            self.table = self._build_cache() if cfg.cache.enabled else None
        curriculum_cfg = cfg.curriculum
        if cfg.task == "pretrain" and curriculum_cfg.enabled:
            curriculum_cfg = type(curriculum_cfg)(**{**curriculum_cfg.__dict__, "enabled": False})
        self.curriculum = OverlapCurriculum(curriculum_cfg, cfg.optim.warmup_steps,
                                            cfg.optim.decay_steps)
        params = [p for p in self.module.parameters() if p.requires_grad]
        self.params = params
        self.optimizer = torch.optim.AdamW(params, lr=cfg.optim.lr, betas=tuple(cfg.optim.betas),
                                           weight_decay=cfg.optim.weight_decay)
        self.wrapped = self.module
        if self.info.enabled:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.wrapped = DistributedDataParallel(self.module, device_ids=ids)
        self.log = CsvLog(self.out / LOG_FILE) if self.info.is_main else None
        logger.info("task %s: %d trainable parameters, %s", cfg.task,
                    trainable_parameters(self.module), self.dataset_summary())

    def dataset_summary(self) -> str:
        if self.config.task == "pretrain":
            return f"groups {self.dataset.sizes()}"
        return f"{len(self.dataset)} pairs"

    def _build_cache(self):
        from g2g_model.training.cached_features import build_feature_cache

        cfg = self.config
        cache_dir = Path(cfg.cache.dir) if cfg.cache.dir else self.out / "features"
        specs = self.dataset.group_specs()
        variants = cfg.cache.noise_variants
        if NOISE_PRESETS[cfg.noise].rot_std_deg == 0 and NOISE_PRESETS[cfg.noise].trans_std_m == 0:
            variants = 1
        # Rank 0 encodes, the others wait and then read the finished shards.
        if not self.info.is_main:
            ddp.barrier(self.info)
        table = build_feature_cache(specs, self.store, self.backbone, cache_dir, self.noise,
                                    variants, cfg.seed, cfg.cache.dtype,
                                    batch_size=64 if self.device.type == "cuda" else 8,
                                    progress=self.progress)
        if self.info.is_main:
            ddp.barrier(self.info)
        return table

    # ------------------------------------------------------------------ batches
    def _pair_batch(self, indices: List[int], gen: torch.Generator):
        dev = self.device
        gt_a = torch.stack([torch.from_numpy(self.targets[i][0]) for i in indices]).float()
        gt_b = torch.stack([torch.from_numpy(self.targets[i][1]) for i in indices]).float()
        if self.table is not None:
            variants = self.table.variants
            feats_a, feats_b = [], []
            for i in indices:
                item = self.dataset.items[i]
                va = int(torch.randint(variants, (1,), generator=gen))
                vb = int(torch.randint(variants, (1,), generator=gen))
                feats_a.append(self.table.get(group_key(item.spec_a), va))
                feats_b.append(self.table.get(group_key(item.spec_b), vb))
            fa, fb = torch.stack(feats_a), torch.stack(feats_b)
        else:
            from g2g_model.training.pair_dataset import collate

            batch = collate([self.dataset.load(i) for i in indices])
            poses_a, poses_b = perturb_group_poses(batch["poses_a"], batch["poses_b"],
                                                   self.noise, gen)
            with torch.no_grad(), self._autocast():
                fa = self.backbone(batch["images_a"].to(dev), batch["intrinsics_a"].to(dev),
                                   poses_a.to(dev)).float()
                fb = self.backbone(batch["images_b"].to(dev), batch["intrinsics_b"].to(dev),
                                   poses_b.to(dev)).float()
        return fa.to(dev), fb.to(dev), gt_a.to(dev), gt_b.to(dev)

    def _autocast(self):
        return autocast(self.device, torch.bfloat16 if self.bf16 else None)

    def _step_losses(self, step: int) -> Dict[str, torch.Tensor]:
        gen = step_generator(self.config.seed, self.info.rank, step)
        if self.config.task == "pretrain":
            kinds = sorted(self.samplers)
            rig_frac = self.config.data.rig_group_fraction
            if len(kinds) == 2:
                kind = "rig" if float(torch.rand(1, generator=gen)) < rig_frac else "win"
            else:
                kind = kinds[0]
            indices = self.samplers[kind].next_batch()
            batch = self.dataset.load_batch(kind, indices)
            batch = {k: v.to(self.device) for k, v in batch.items()}
            if self.trace:
                self.seen.append([kind, *indices])
            with self._autocast():
                losses = self.wrapped(batch, gen)
            losses["gate_rot"] = losses["pose_rotation"]
            losses["gate_trans"] = losses["pose_translation"]
            return losses
        sampler = self.samplers["pairs"]
        sampler.set_threshold(self.curriculum.threshold)
        indices = sampler.next_batch()
        if self.trace:
            self.seen.append(list(indices))
        fa, fb, gt_a, gt_b = self._pair_batch(indices, gen)
        with self._autocast():
            losses = self.wrapped(fa, fb, gt_a, gt_b)
        losses["gate_rot"] = losses["rot_b0"]
        losses["gate_trans"] = losses["trans_b0"]
        return losses

    # ------------------------------------------------------------------ state
    def state_dict(self) -> Dict:
        return {"step": self.curriculum.step, "module": strip_ddp(self.module).state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "curriculum": self.curriculum.state_dict(),
                "samplers": {k: s.state_dict() for k, s in self.samplers.items()},
                "config": self.config.to_dict(), "inputs": self.inputs,
                "train_seconds": self._train_seconds(), "rng": rng_state()}

    def load_state(self) -> bool:
        path = self.out / STATE_FILE
        if not (self.resume and path.is_file()):
            return False
        state = torch.load(path, map_location="cpu", weights_only=False)
        check_resume_config(state["config"], self.config.to_dict(), path)
        check_resume_inputs(state.get("inputs"), self.inputs, path)
        strip_ddp(self.module).load_state_dict(state["module"], strict=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.curriculum.load_state_dict(state["curriculum"])
        for key, sampler in self.samplers.items():
            sampler.load_state_dict(state["samplers"][key])
        restore_rng_state(state["rng"])
        self.seconds_before = float(state.get("train_seconds", 0.0))
        if self.log is not None:
            self.log.truncate_after(self.curriculum.step)
        logger.info("resumed %s at step %d", path, self.curriculum.step)
        return True

    def save(self) -> None:
        """State for resuming plus the exported model (rank 0)."""
        if not self.info.is_main:
            return
        tmp = self.out / (STATE_FILE + ".tmp")
        torch.save(self.state_dict(), tmp)
        os.replace(tmp, self.out / STATE_FILE)
        self.export()
        if self.log is not None and self.log.path.is_file():
            keys = ("loss", "depth", "pose") if self.config.task == "pretrain" else (
                "loss", "loss_b", "rot_b0", "trans_b0")
            plot_training(self.log.path, self.out / PLOT_FILE, keys)

    def _train_seconds(self) -> float:
        now = time.perf_counter()
        return self.seconds_before + (now - self._t_start if self._t_start else 0.0)

    def training_info(self) -> Dict:
        cfg = self.config
        return {"task": cfg.task, "steps": self.curriculum.step,
                "phase": self.curriculum.phase, "data_root": cfg.data.root,
                "index": cfg.data.index, "pairs": len(self.dataset) if self.g2g else None,
                "reverse_fraction": cfg.data.reverse_fraction,
                "seed": cfg.seed, "cached_features": cfg.cache.enabled,
                "train_seconds": round(self._train_seconds(), 1),
                "curriculum_transitions": self.curriculum.transitions[-20:],
                "inputs_sha256": self.inputs}

    def export(self) -> Path:
        return export_model(self.out, self.config, self.backbone, self.g2g,
                            self.training_info())

    # ------------------------------------------------------------------ loop
    def _set_feature_statistics(self, max_pairs: int = 256) -> None:
        """A fresh run of a model with ``feature_norm_patches`` (not initialised from a
        checkpoint): its standardisation from the frozen features of the first ``max_pairs``
        training pairs (seeded, the same on every rank). Resumed runs restore it from the state."""
        if self.g2g is None or not self.g2g.config.feature_norm_patches or \
                self.config.model.init_from:
            return
        gen = torch.Generator().manual_seed(self.config.seed)
        feats = []
        indices = list(range(min(max_pairs, len(self.dataset))))
        bs = self.config.optim.batch_size
        for members in bucket_members(indices, self.pair_sizes).values():  # one rig size each
            for start in range(0, len(members), bs):
                fa, fb, _, _ = self._pair_batch(members[start:start + bs], gen)
                feats += [fa.flatten(0, 1).cpu(), fb.flatten(0, 1).cpu()]
        self.g2g.set_feature_statistics(torch.cat(feats))
        logger.info("feature standardisation from %d frames of %d pairs",
                    sum(len(f) for f in feats), len(indices))

    def run(self) -> Dict:
        cfg = self.config
        if not self.load_state():
            self._set_feature_statistics()
        start_step = self.curriculum.step
        total = cfg.optim.max_steps or None
        bar = tqdm(total=total, initial=start_step, desc=f"train {cfg.task}", unit="step",
                   disable=not self.progress)
        self.module.train()
        sums: Dict[str, float] = {}
        count = 0
        t0 = time.perf_counter()
        self._t_start = t0
        t_log = t0
        done_this_run = 0
        interrupted = False
        while not self.curriculum.done:
            step = self.curriculum.step
            if cfg.optim.max_steps and step >= cfg.optim.max_steps:
                break
            if self.stop_after is not None and done_this_run >= self.stop_after:
                interrupted = True
                break
            lr = cfg.optim.lr * self.curriculum.lr_factor()
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            threshold = self.curriculum.threshold
            phase = self.curriculum.phase
            losses = self._step_losses(step)
            self.optimizer.zero_grad(set_to_none=True)
            losses["loss"].backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.optim.grad_clip)
            self.optimizer.step()
            gate = ddp.mean_across_ranks(
                torch.stack([losses["gate_rot"].detach().float(),
                             losses["gate_trans"].detach().float()]).cpu(), self.info)
            self.curriculum.update(float(gate[0]), float(gate[1]))
            done_this_run += 1
            for key, value in losses.items():
                if torch.is_tensor(value) and value.numel() == 1 and key != "dropped":
                    sums[key] = sums.get(key, 0.0) + float(value.detach())
            sums["grad_norm"] = sums.get("grad_norm", 0.0) + float(grad_norm)
            count += 1
            new_step = self.curriculum.step
            bar.update(1)
            if new_step % cfg.log_every == 0 or self.curriculum.done:
                now = time.perf_counter()
                row = {"step": new_step, "phase": phase, "threshold": threshold, "lr": lr}
                row.update({k: v / count for k, v in sums.items()})
                gate_rot, gate_trans = self.curriculum.gate_means()
                row.update({"gate_rot_mean": gate_rot, "gate_trans_mean": gate_trans,
                            "sec_per_step": (now - t_log) / count,
                            "elapsed_s": now - t0})
                if self.log is not None:
                    self.log.append(row)
                bar.set_postfix(loss=f"{row['loss']:.3f}", phase=phase, thr=threshold)
                sums, count, t_log = {}, 0, now
            if new_step % cfg.checkpoint_every == 0:
                self.save()
        bar.close()
        if not interrupted:
            self.save()
        ddp.barrier(self.info)
        summary = {"task": cfg.task, "start_step": start_step, "end_step": self.curriculum.step,
                   "phase": self.curriculum.phase, "interrupted": interrupted,
                   "seconds": round(time.perf_counter() - t0, 2),
                   "train_seconds_total": round(self._train_seconds(), 1),
                   "out_dir": str(self.out), "inputs_sha256": self.inputs}
        if self.info.is_main:
            (self.out / "summary.json").write_text(json.dumps(summary, indent=1))
        return summary

    def close(self) -> None:
        ddp.shutdown(self.info)


def train(config: TrainConfig, resume: bool = True, progress: bool = True,
          stop_after: Optional[int] = None) -> Dict:
    """Run (or resume) a training run; returns a summary dict."""
    trainer = Trainer(config, resume=resume, progress=progress, stop_after=stop_after)
    try:
        return trainer.run()
    finally:
        trainer.close()
