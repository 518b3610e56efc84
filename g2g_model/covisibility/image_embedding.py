"""Image covisibility embedding: a small CNN whose descriptor cosine approximates overlap.

The covisibility embedding (:mod:`g2g_model.covisibility.embedding`) describes a frame from the
backbone's cached tokens. With the compact backbone those tokens tell places apart no better than
a 32 px colour thumbnail (``experiments/probe_covis_images.py``), so this model looks at the image
itself:

1. the RGB frame is shrunk (area interpolation) to ``size x size`` (64) pixels;
2. four stride-2 convolution blocks (``width``, 2, 4, 4 x ``width`` channels, batch norm, ReLU)
   give a 4 x 4 grid, flattened and projected linearly to ``dim`` (128) values, unit length;
3. the score of two frames is the cosine of their descriptors.

It is trained from scratch (:func:`train_image_embedding`) on simulator scenes so that the cosine
regresses the symmetric overlap of frame pairs of the same scene (MSE): each batch is half
covisible pairs (overlap > 0.05), half random pairs, with a random brightness and colour gain
per image (seasons, exposure). It does not depend on the backbone, so it survives a backbone
change. The relocalize node averages its score with the token embedding's
(``window_scorer: combined``); the average picks better windows than either (docs/COVISIBILITY.md).

Checkpoint: a tagged safetensors file (``g2g_covis_image_embedding``, version 1) with the network
(float16), its architecture and the training settings; loading is strict (architecture, tensor
names and shapes, finite values).
"""

from __future__ import annotations

import functools
import logging
import pathlib
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from g2g_model.covisibility.checkpoint import CheckpointError, load_float_state
from g2g_model.tagged_safetensors import read_tagged, write_tagged

LOG = logging.getLogger(__name__)

HEADER_KEY = "g2g_covis_image_embedding"
VERSION = 1
# Measured on the validation scenes (docs/COVISIBILITY.md).
IMAGE_EMBEDDING_DEFAULTS = {"size": 64, "width": 32, "dim": 128, "steps": 3000, "batch_size": 128,
                            "lr": 2e-3}
POSITIVE_OVERLAP = 0.05


def _block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, 2, 1, bias=False), nn.BatchNorm2d(c_out),
                         nn.ReLU(), nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False),
                         nn.BatchNorm2d(c_out), nn.ReLU())


def conv_features(c_in: int, width: int) -> nn.Sequential:
    """Four stride-2 blocks (``width``, 2, 4, 4 x ``width`` channels): ``[N, c_in, S, S]`` to
    ``[N, 4 width, S / 16, S / 16]`` (the image embedding's and the pair verifier's trunk)."""
    return nn.Sequential(_block(c_in, width), _block(width, 2 * width),
                         _block(2 * width, 4 * width), _block(4 * width, 4 * width))


class ImageEmbedding(nn.Module):
    """Unit descriptors ``[N, dim]`` of ``[N, 3, size, size]`` uint8 images (see the module
    docstring)."""

    def __init__(self, size: int = 64, width: int = 32, dim: int = 128):
        super().__init__()
        if size < 16 or size % 16 or width < 1 or dim < 1:
            raise ValueError(f"size must be a multiple of 16 (>= 16), width and dim >= 1; got "
                             f"size {size}, width {width}, dim {dim}")
        self.size, self.width, self.dim = size, width, dim
        self.features = conv_features(3, width)
        self.head = nn.Linear(4 * width * (size // 16) ** 2, dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float() / 127.5 - 1.0
        return F.normalize(self.head(self.features(x).flatten(1)), dim=-1)

    def describe(self, rgbs: Sequence[np.ndarray], batch: int = 256) -> torch.Tensor:
        """Descriptors ``[N, dim]`` of RGB uint8 images ``[H, W, 3]`` (any size)."""
        if not len(rgbs):
            return torch.zeros(0, self.dim)
        small = torch.stack([shrink(rgb, self.size) for rgb in rgbs])
        with torch.no_grad():
            return torch.cat([self(small[i:i + batch]) for i in range(0, len(small), batch)])


def shrink(rgb: np.ndarray, size: int) -> torch.Tensor:
    """``[3, size, size]`` uint8 from an RGB uint8 ``[H, W, 3]`` image (area interpolation)."""
    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"expected an RGB uint8 image [H, W, 3], got {rgb.dtype} {rgb.shape}")
    x = torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1)[None].float()
    return F.interpolate(x, size=(size, size), mode="area")[0].round().to(torch.uint8)


def random_gain(images: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Training augmentation: ``[N, 3, S, S]`` uint8 images times a random colour gain per
    channel (0.8-1.2) and a brightness gain (0.7-1.3) per image, as float in [0, 255]. The
    gains are drawn on the CPU from ``gen`` whatever the images' device."""
    n = len(images)
    gain = (torch.empty(n, 3, 1, 1).uniform_(0.8, 1.2, generator=gen)
            * torch.empty(n, 1, 1, 1).uniform_(0.7, 1.3, generator=gen))
    return (images.float() * gain.to(images.device)).clamp(0, 255)


def image_similarity(model: ImageEmbedding, map_images: Sequence[np.ndarray],
                     query_images: Sequence[np.ndarray]) -> np.ndarray:
    """``[T_A, T_B]`` cosine of the image descriptors (estimated overlaps)."""
    return (model.describe(map_images) @ model.describe(query_images).T).numpy()


# A training state is resumed only by a run with the same values of these record keys
# (``init_sha256``: the weights a fine-tune starts from; absent, so equal, in other runs).
RESUME_KEYS = ("steps", "batch_size", "lr", "seed", "scenes", "frames", "init_sha256")


def fit_pair_model(model: nn.Module, steps: int, lr: float, batch_loss: Callable[[], torch.Tensor],
                   record: Dict, desc: str, progress: bool = True,
                   save: Optional[Callable[[nn.Module, Dict], object]] = None,
                   state_path=None, gen: Optional[torch.Generator] = None,
                   save_every: int = 500, frozen_norm: bool = False) -> Dict:
    """The training loop of the image models: AdamW (weight decay 1e-4) with a one-cycle
    schedule peaking at ``lr``, ``steps`` steps of ``batch_loss()`` (which draws its own batch
    from ``gen``), a running loss on the progress bar and in the log, and ``save(model in eval
    mode, record so far)`` every ``save_every`` steps and at the end.

    With ``state_path``, the whole training state (model, optimizer, schedule, ``gen``, running
    loss) is also written there (atomically) every ``save_every`` steps, and a run started with
    an existing state file continues from it: the result is the same as an uninterrupted run.
    A state file of other settings (``RESUME_KEYS`` of ``record``) is refused; the file is
    removed when the run completes.

    ``frozen_norm``: batch-norm layers keep their running statistics (stay in eval mode), as a
    fine-tune of a trained model on a differently drawn batch needs.

    Returns ``record`` with the final loss, the seconds and the steps done; the model is left
    in eval mode."""
    def train_mode():
        model.train()
        if frozen_norm:
            for module in model.modules():
                if isinstance(module, nn.modules.batchnorm._BatchNorm):
                    module.eval()

    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps,
                                                pct_start=0.05)
    start, running, seconds = 0, None, 0.0
    state_path = pathlib.Path(state_path) if state_path else None
    if state_path is not None and state_path.is_file():
        state = torch.load(str(state_path), weights_only=False)
        wrong = {k: (state["record"].get(k), record.get(k)) for k in RESUME_KEYS
                 if state["record"].get(k) != record.get(k)}
        if wrong:
            raise ValueError(f"training state {state_path} belongs to other settings "
                             f"(stored, now): {wrong}; remove it or use other settings")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["schedule"])
        if gen is not None:
            gen.set_state(state["generator"])
        start, running, seconds = state["step"], state["running"], state["seconds"]
        LOG.info("resuming %s from step %d of %s", desc, start, state_path)
    train_mode()
    t0 = time.time() - seconds
    bar = tqdm(range(start, steps), desc=desc, disable=not progress, initial=start, total=steps)
    for step in bar:
        loss = batch_loss()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        value = loss.item()
        running = value if running is None else 0.98 * running + 0.02 * value
        bar.set_postfix(loss=f"{running:.4f}")
        if step % 100 == 0:
            LOG.info("step %d loss %.4f (%.0f s)", step, running, time.time() - t0)
        if step % save_every == save_every - 1 and step != steps - 1:
            if save is not None:
                save(model.eval(), dict(record, done_steps=step + 1, final_loss=running))
                train_mode()
            if state_path is not None:
                tmp = state_path.with_name(state_path.name + ".tmp")
                torch.save({"record": record, "step": step + 1, "running": running,
                            "seconds": time.time() - t0, "model": model.state_dict(),
                            "optimizer": opt.state_dict(), "schedule": sched.state_dict(),
                            "generator": None if gen is None else gen.get_state()}, str(tmp))
                tmp.replace(state_path)
    record = dict(record, final_loss=running, seconds=round(time.time() - t0, 1),
                  done_steps=steps)
    model.eval()
    if save is not None:
        save(model, record)
    if state_path is not None and state_path.is_file():
        state_path.unlink()
    return record


def train_image_embedding(scenes: List[Dict[str, torch.Tensor]],
                          steps: int = IMAGE_EMBEDDING_DEFAULTS["steps"],
                          batch_size: int = IMAGE_EMBEDDING_DEFAULTS["batch_size"],
                          width: int = IMAGE_EMBEDDING_DEFAULTS["width"],
                          dim: int = IMAGE_EMBEDDING_DEFAULTS["dim"],
                          lr: float = IMAGE_EMBEDDING_DEFAULTS["lr"], seed: int = 0,
                          progress: bool = True, checkpoint: Optional[str] = None,
                          state_path=None) -> Tuple[ImageEmbedding, Dict]:
    """Train on per-scene ``{"images": [F, 3, S, S] uint8, "overlap": [F, F]}`` (all frames of
    a scene, their symmetric overlaps; see :func:`g2g_model.covisibility.sim_data.
    scene_image_data`). ``checkpoint``: also save there every 500 steps (training settings
    say how far it got). ``state_path``: resumable training state (:func:`fit_pair_model`).
    Returns the model (eval mode) and the training record."""
    if not scenes:
        raise ValueError("no training scenes")
    if steps < 1 or batch_size < 2:
        raise ValueError(f"steps must be >= 1 and batch_size >= 2, got {steps}, {batch_size}")
    size = int(scenes[0]["images"].shape[-1])
    positives = [torch.nonzero(s["overlap"].float() > POSITIVE_OVERLAP) for s in scenes]
    if any(len(p) == 0 for p in positives):
        raise ValueError("every training scene needs covisible frame pairs")
    torch.manual_seed(seed)
    model = ImageEmbedding(size, width, dim)
    gen = torch.Generator().manual_seed(seed)
    record = {"steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed,
              "scenes": len(scenes), "frames": int(sum(len(s["images"]) for s in scenes))}

    def batch_loss() -> torch.Tensor:
        a, b, y = [], [], []
        for k, s in enumerate(torch.randint(len(scenes), (batch_size,), generator=gen).tolist()):
            scene = scenes[s]
            if k < batch_size // 2:
                pos = positives[s]
                i, j = pos[int(torch.randint(len(pos), (1,), generator=gen))].tolist()
            else:
                i, j = torch.randint(len(scene["images"]), (2,), generator=gen).tolist()
            a.append(scene["images"][i])
            b.append(scene["images"][j])
            y.append(float(scene["overlap"][i, j]))
        e = model(random_gain(torch.stack(a + b), gen))
        return F.mse_loss((e[:batch_size] * e[batch_size:]).sum(-1), torch.tensor(y))

    save = functools.partial(save_image_embedding, checkpoint) if checkpoint else None
    record = fit_pair_model(model, steps, lr, batch_loss, record, "image embedding", progress,
                            save, state_path, gen)
    return model, record


def save_image_embedding(path, model: ImageEmbedding, training: Dict):
    header = {"version": VERSION, "size": model.size, "width": model.width, "dim": model.dim,
              "training": training}
    # float16 storage halves the file (1.7 MB for the default); descriptors move by ~1e-3.
    tensors = {k: v.detach().to(torch.float16).contiguous()
               for k, v in model.state_dict().items() if v.is_floating_point()}
    return write_tagged(path, HEADER_KEY, header, tensors)


def load_image_embedding(path) -> Tuple[ImageEmbedding, Dict]:
    """Load strictly; ``CheckpointError`` names what is wrong (missing, corrupt, other version,
    bad architecture, tensors that do not fit it)."""
    header, tensors = read_tagged(path, HEADER_KEY, VERSION, "image covisibility embedding",
                                  CheckpointError)
    try:
        model = ImageEmbedding(int(header["size"]), int(header["width"]), int(header["dim"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"image covisibility embedding {path} has a bad header "
                              f"({exc})") from None
    load_float_state(model, tensors, "image covisibility embedding", path)
    return model.eval(), header
