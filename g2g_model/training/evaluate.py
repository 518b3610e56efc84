"""Evaluation of G2G checkpoints and of the classical baseline on a pair index (``g2g-eval``).

Every method sees the same pairs (a relocalization window index or a rig-pairs index of
held-out scenes) and is scored with the metric suite of :mod:`g2g_model.metrics` (primary pose
T_{A0<-B0}, all B_j, all A_i; means and medians; per overlap bin).

Modes:
    clean: input poses are the true intra-group poses;
    noisy: input poses get the training extrinsic noise (1.5 deg / 0.1 m per axis, seeded per
        pair, frame 0 untouched); targets stay clean. The classical baseline gets the same noisy
        poses.
The references ("no motion", a constant step chosen in hindsight) are
:mod:`g2g_model.training.reference_methods`. The no-cross-group-attention switch evaluates a
checkpoint with the bridge's block-diagonal mask
(``G2GConfig.cross_group_attention = False``), on the same weights. ``paired.md`` compares every
method with the first plain checkpoint, and each switch run with the same run without it, pair by
pair (mean difference with a bootstrap interval; how many pairs are worse or better), so that a
mean moved by one pair does not pass for a difference.
"""

from __future__ import annotations

import csv
import json
import logging
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch
from tqdm import tqdm

from g2g_model.training.augment import NOISE_PRESETS, perturb_poses
from g2g_model.metrics import (
    PAIRED_COLUMNS,
    flatten_group_summary,
    format_csv_table,
    format_markdown_table,
    group_errors,
    paired_differences,
    summarize_groups,
)
from g2g_model.model.g2g import G2GModel
from g2g_model.training.pair_dataset import PairDataset, read_pairs
from g2g_model.training.reference_methods import (ConstantStepMethod, IdentityMethod,
                                                  hindsight_step)
from g2g_model.training.trajectory_groups import TrajectoryStore
from g2g_model.training.verified_methods import (VERIFICATION_COLUMNS, VerifiedMethod,
                                                 verification_summary)

logger = logging.getLogger(__name__)

MODES = ("clean", "noisy")


@dataclass
class MethodSpec:
    """One evaluated method: a checkpoint (optionally with the ablation switch) or classical."""

    label: str
    checkpoint: str = ""
    no_cross_group: bool = False
    classical_preset: str = ""
    identity: bool = False
    constant_step: bool = False  # the hindsight constant step (reference_methods)
    verify: bool = False  # geometric verification after the checkpoint (or alone: no checkpoint)
    flip_directions: bool = False  # one way where the pipeline runs both, both where it runs one
    no_rotation_matching: bool = False  # G2G's own pose, not the one from feature matches
    # relocalization verification: also the relative pose between the windows (window_relative)
    relative_fallback: bool = False


class G2GMethod:
    """A checkpoint through the product's :class:`~g2g_model.estimation.pipeline.G2GPipeline`
    (fp32, as the nodes with ``precision: fp32``); ``predict(group_a, group_b)`` on loaded groups
    with their (clean or noisy) input poses. ``no_cross_group``: the same weights with the bridge's
    block-diagonal mask. ``flip_directions``: one way where the pipeline would run both
    directions, both where it would run one (:mod:`g2g_model.estimation.pipeline`).
    ``no_rotation_matching``: G2G's own pose where the pipeline would take it from feature
    matches (:mod:`g2g_model.estimation.rotation_matching`)."""

    def __init__(self, path: str, no_cross_group: bool = False, device: str = "cpu",
                 flip_directions: bool = False, no_rotation_matching: bool = False) -> None:
        from g2g_model.estimation.pipeline import G2GPipeline

        self.pipeline = G2GPipeline.from_checkpoint(
            path, device, bf16=False, rotation_matching=False if no_rotation_matching else "auto")
        if flip_directions:
            self.pipeline.both_directions = not self.pipeline.both_directions
        if no_cross_group:
            model = self.pipeline.model
            ablated = G2GModel(model.config.replace(cross_group_attention=False))
            ablated.load_state_dict(model.state_dict(), strict=True)
            self.pipeline.model = ablated.eval().to(self.pipeline.device)
        self.max_frames = self.pipeline.max_frames
        self.image_size = tuple(self.pipeline.image_size)

    def prediction(self, group_a, group_b, poses_a: torch.Tensor, poses_b: torch.Tensor):
        """The pipeline's :class:`~g2g_model.estimation.pipeline.Prediction` on loaded groups."""
        from g2g_model.estimation.groups import PreparedGroup

        def prepared(group, poses):
            return PreparedGroup(group.images[None], group.intrinsics[None],
                                 poses[None].float(), np.eye(4))

        return self.pipeline.predict_prepared(prepared(group_a, poses_a),
                                              prepared(group_b, poses_b))

    def predict(self, group_a, group_b, poses_a: torch.Tensor, poses_b: torch.Tensor):
        """``(pred_a [N_A,4,4], pred_b [N_B,4,4])`` float64 numpy rigid transforms (rotations
        projected onto SO(3); pred_a[0] = identity), exactly as the pipeline (and so the ROS
        nodes) returns them: g2g-eval-bag's numbers then equal these on the same pairs."""
        pred = self.prediction(group_a, group_b, poses_a, poses_b)
        return pred.poses_a, pred.poses_b


class ClassicalMethod:
    """The SIFT + essential-matrix baseline on the native-resolution images."""

    def __init__(self, preset: str = "default") -> None:
        from g2g_model.baseline.classical import ClassicalBaseline

        self.baseline = ClassicalBaseline(preset)

    def predict(self, images_a, k_a, world_a, images_b, k_b, world_b):
        from g2g_model.baseline.classical import ImageGroup

        res = self.baseline.predict(ImageGroup(images_a, k_a, world_a),
                                    ImageGroup(images_b, k_b, world_b))
        return res.poses_a, res.poses_b


def _uint8_images(group) -> List[np.ndarray]:
    return [(img.permute(1, 2, 0).numpy() * 255.0 + 0.5).clip(0, 255).astype(np.uint8)
            for img in group.images]


def _noisy(poses: torch.Tensor, key: str, mode: str) -> torch.Tensor:
    if mode == "clean":
        return poses
    gen = torch.Generator().manual_seed(zlib.crc32(key.encode()))
    return perturb_poses(poses.double(), NOISE_PRESETS["g2g"], gen).float()


def evaluate_methods(task: str, root: str, index: str, methods: List[MethodSpec], out_dir: str,
                     mode: str = "clean", max_pairs: int = 0, seed: int = 0,
                     device: str = "cpu", progress: bool = True,
                     reverse_fraction: float = 0.0,
                     cameras: Optional[List[str]] = None) -> Dict[str, Dict]:
    """Evaluate every method on the same pairs; write tables, CSVs and plots under ``out_dir``.
    ``cameras``: rig pairs hold these cameras of the rig, in this order (default: all).

    Raises:
        ValueError: unknown mode, empty index, missing checkpoint, a checkpoint whose
            ``max_frames`` is smaller than the groups, all before any pair is evaluated.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not methods:
        raise ValueError("no method to evaluate (give --checkpoint and / or --classical)")
    items = read_pairs(task, root, index, 0.0, max_pairs, seed, reverse_fraction, cameras)
    native = TrajectoryStore(root, (1, 1))
    dataset = PairDataset(items, native)
    runners = {}
    for spec in methods:
        if spec.verify and not spec.checkpoint:
            runners[spec.label] = VerifiedMethod(task, config=verifier_config(task, spec))
        elif spec.identity:
            runners[spec.label] = IdentityMethod()
        elif spec.constant_step:
            runners[spec.label] = ConstantStepMethod(hindsight_step(
                [dataset.targets(i)[1][0] for i in range(len(items))]))
        elif spec.classical_preset:
            runners[spec.label] = ClassicalMethod(spec.classical_preset)
        else:
            if not Path(spec.checkpoint).is_file():
                raise ValueError(f"checkpoint {spec.checkpoint!r} does not exist")
            runners[spec.label] = G2GMethod(spec.checkpoint, spec.no_cross_group, device,
                                            spec.flip_directions, spec.no_rotation_matching)
            if spec.verify:
                runners[spec.label] = VerifiedMethod(task, runners[spec.label],
                                                     verifier_config(task, spec))
    g2g_sizes = {r.image_size for r in runners.values()
                 if not isinstance(r, ClassicalMethod) and r.image_size is not None}
    # The groups' frame counts (also: a camera the rig lacks is named here, before any work).
    counts = [len(native.frames(spec)) for it in items[:1] + items[-1:]
              for spec in (it.spec_a, it.spec_b)]
    first = native.reader(items[0].spec_a[1]).rig
    cam0 = first[cameras[0] if cameras else first.names[0]]
    stores = {size: TrajectoryStore(root, size) for size in g2g_sizes}
    stores[(cam0.height, cam0.width)] = TrajectoryStore(root, (cam0.height, cam0.width))
    for label, runner in runners.items():
        runner = getattr(runner, "g2g", runner)
        if isinstance(runner, G2GMethod) and max(counts) > runner.max_frames:
            raise ValueError(f"{label}: groups have {max(counts)} frames but the checkpoint "
                             f"takes at most max_frames={runner.max_frames}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    samples: Dict[str, list] = {label: [] for label in runners}
    rows: Dict[str, list] = {label: [] for label in runners}
    seconds: Dict[str, float] = {label: 0.0 for label in runners}
    native_size = (cam0.height, cam0.width)
    for i in tqdm(range(len(items)), desc="eval", unit="pair", disable=not progress):
        it = items[i]
        gt_a, gt_b = dataset.targets(i)
        loaded = {}
        key = f"{it.spec_a}|{it.spec_b}"
        for label, runner in runners.items():
            size = native_size if isinstance(runner, ClassicalMethod) else (
                runner.image_size or native_size)
            if size not in loaded:
                loaded[size] = (stores[size].load(it.spec_a), stores[size].load(it.spec_b))
            ga, gb = loaded[size]
            poses_a = _noisy(ga.cam_to_anchor, "a" + key, mode)
            poses_b = _noisy(gb.cam_to_anchor, "b" + key, mode)
            t0 = time.perf_counter()
            path, inliers = "", ""
            if isinstance(runner, VerifiedMethod):
                if native_size not in loaded:
                    loaded[native_size] = (stores[native_size].load(it.spec_a),
                                           stores[native_size].load(it.spec_b))
                na, nb = loaded[native_size]
                pred_a, pred_b, path, inliers = runner.predict(
                    ga, gb, poses_a, poses_b, (_uint8_images(na), na.intrinsics.double().numpy(),
                                               _uint8_images(nb), nb.intrinsics.double().numpy()))
            elif isinstance(runner, IdentityMethod):
                pred_a, pred_b = runner.predict(poses_a, poses_b)
            elif isinstance(runner, G2GMethod):
                pred_a, pred_b = runner.predict(ga, gb, poses_a, poses_b)
            else:
                world_a = ga.world_T_cam[0][None] @ poses_a.double().numpy()
                world_b = gb.world_T_cam[0][None] @ poses_b.double().numpy()
                pred_a, pred_b = runner.predict(_uint8_images(ga), ga.intrinsics.double().numpy(),
                                                world_a, _uint8_images(gb),
                                                gb.intrinsics.double().numpy(), world_b)
            dt = time.perf_counter() - t0
            seconds[label] += dt
            samples[label].append((pred_a, pred_b, gt_a, gt_b))
            errs = group_errors(pred_a, pred_b, gt_a, gt_b)
            b0 = errs["b0"]
            rows[label].append({
                "pair": i, "group_a": "|".join(map(str, it.spec_a)),
                "group_b": "|".join(map(str, it.spec_b)), "overlap": it.score,
                "gt_distance_m": float(np.linalg.norm(gt_b[0][:3, 3])),
                "rot_err_deg": float(b0.rot_deg[0]), "trans_err_m": float(b0.trans_m[0]),
                "rta_deg": float(b0.rta_deg[0]) if b0.rta_defined[0] else "",
                "failed": bool(b0.failed[0]),
                "rot_err_b_all_deg": float(errs["b_all"].rot_deg.mean()),
                "trans_err_b_all_m": float(errs["b_all"].trans_m.mean()),
                "time_ms": round(1e3 * dt, 2), "path": path, "inliers": inliers})
    scores = [it.score for it in items]
    results = {}
    for label in runners:
        summary = summarize_groups(samples[label], overlaps=scores if task == "reloc" else None)
        summary["seconds_per_pair"] = seconds[label] / len(items)
        if isinstance(runners[label], VerifiedMethod):
            summary["verification"] = verification_summary(rows[label])
        results[label] = summary
        folder = out / label
        folder.mkdir(exist_ok=True)
        table = flatten_group_summary(summary)
        (folder / "metrics.md").write_text(format_markdown_table(table, title=f"{label} ({mode})"))
        (folder / "metrics.csv").write_text(format_csv_table(table, title=label))
        with open(folder / "pairs.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[label][0]))
            writer.writeheader()
            writer.writerows(rows[label])
        (folder / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    comparison = {label: res["b0"]["all"] for label, res in results.items()}
    title = f"{task} B0, {mode}, {len(items)} pairs"
    (out / "comparison.md").write_text(format_markdown_table(comparison, title=title))
    (out / "comparison.csv").write_text(format_csv_table(comparison, title=title))
    reference = next((s.label for s in methods if s.checkpoint and "+" not in s.label),
                     methods[0].label)
    # Every method against the reference; a switch also against the same run without it.
    comparisons = [(label, reference) for label in rows if label != reference]
    for label in rows:
        without = label.replace("+nocross_switch", "")
        if without not in (label, reference) and without in rows:
            comparisons.append((label, without))
    if comparisons:
        paired = paired_differences(
            {label: ([r["rot_err_deg"] for r in rs], [r["trans_err_m"] for r in rs])
             for label, rs in rows.items()}, comparisons)
        (out / "paired.md").write_text(format_markdown_table(
            paired, columns=PAIRED_COLUMNS,
            title=f"{title}: errors of X minus Y's, pair by pair (95 % bootstrap CI; "
                  "worse / better: pairs beyond 0.5 deg, 0.02 m)"))
    checked = {label: res["verification"] for label, res in results.items()
               if "verification" in res}
    if checked:
        (out / "verification.md").write_text(format_markdown_table(
            checked, columns=VERIFICATION_COLUMNS,
            title=f"{title}: geometric verification (false accept: > 5 deg or > 0.5 m)"))
    plot_results(rows, out)
    return results


def plot_results(rows: Dict[str, list], out: Path) -> None:
    """``maa_curve.png`` (accuracy vs tau for B0) and ``error_vs_overlap.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    taus = np.arange(1, 31)
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, rs in rows.items():
        rot = np.array([r["rot_err_deg"] for r in rs])
        rta = np.array([r["rta_deg"] if r["rta_deg"] != "" else r["rot_err_deg"] for r in rs])
        combined = np.maximum(rot, rta)
        ax.plot(taus, [100 * np.mean(combined < t) for t in taus], label=label)
    ax.set_xlabel("tau (deg)")
    ax.set_ylabel("% pairs with max(rot err, RTA) < tau")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "maa_curve.png", dpi=90)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for label, rs in rows.items():
        ov = [r["overlap"] for r in rs]
        axes[0].scatter(ov, [r["rot_err_deg"] for r in rs], s=8, label=label, alpha=0.6)
        axes[1].scatter(ov, [r["trans_err_m"] for r in rs], s=8, label=label, alpha=0.6)
    axes[0].set_ylabel("B0 rotation error (deg)")
    axes[1].set_ylabel("B0 translation error (m)")
    for ax in axes:
        ax.set_xlabel("overlap score")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "error_vs_overlap.png", dpi=90)
    plt.close(fig)


def verifier_config(task: str, spec: MethodSpec):
    """The verification settings of ``spec`` (None: the verifier's defaults)."""
    if task != "reloc" or not spec.relative_fallback:
        return None
    from g2g_model.localization.verifier_config import VerifierConfig

    return VerifierConfig(relative_fallback=True)


def default_methods(checkpoints: List[str], classical: Optional[str], ablation: bool,
                    identity: bool = False, verify: bool = False,
                    directions: bool = False, no_rotation_matching: bool = False,
                    constant_step: bool = False,
                    relative_fallback: bool = False) -> List[MethodSpec]:
    """Labels: checkpoint file stems (``+nocross_switch`` with the switch, ``+verified`` with
    geometric verification, ``+flipped_directions`` run one way if the checkpoint runs both and
    the other way round, ``+no_rotation_matching`` with G2G's own pose; both the switch and G2G's
    own pose with ``ablation`` and ``no_rotation_matching``), ``classical``,
    ``identity``, ``constant_step``, ``geometry`` (verification alone)."""
    specs = [MethodSpec("identity", identity=True)] if identity else []
    if constant_step:
        specs.append(MethodSpec("constant_step", constant_step=True))
    if verify:
        specs.append(MethodSpec("geometry", verify=True, relative_fallback=relative_fallback))
    for path in checkpoints:
        stem = Path(path).stem
        specs.append(MethodSpec(stem, checkpoint=path))
        if verify:
            specs.append(MethodSpec(stem + "+verified", checkpoint=path, verify=True,
                                    relative_fallback=relative_fallback))
        if ablation:
            specs.append(MethodSpec(stem + "+nocross_switch", checkpoint=path,
                                    no_cross_group=True))
        if directions:
            specs.append(MethodSpec(stem + "+flipped_directions", checkpoint=path,
                                    flip_directions=True))
        if no_rotation_matching:
            specs.append(MethodSpec(stem + "+no_rotation_matching", checkpoint=path,
                                    no_rotation_matching=True))
        if no_rotation_matching and ablation:  # the switch on G2G's own pose
            specs.append(MethodSpec(stem + "+nocross_switch+no_rotation_matching",
                                    checkpoint=path, no_cross_group=True,
                                    no_rotation_matching=True))
    if classical:
        specs.append(MethodSpec("classical", classical_preset=classical))
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"method labels must be unique, got {labels}: give checkpoints "
                         "with different file names")
    return specs
