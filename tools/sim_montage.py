"""One PNG of a simulated traversal: rows are frames spread over it, columns its cameras.

Shows what a set of ``g2g-sim`` options renders, without writing a dataset. Cameras of other
image sizes are padded with black to the tallest. Example (the montages in docs/sim/)::

    python tools/sim_montage.py docs/sim/street_car6.png --seed 1 --scene-preset street \\
        --rig-preset car6 --motion car --textures photo --lighting random --exposure jitter
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from g2g_model.data.sim.generate import CHOICES, SimConfig, render_traversal
from g2g_model.data.sim.rigs import RIG_PRESETS
from g2g_model.data.sim.scene import SCENE_PRESETS


def montage(cfg: SimConfig, seed: int, traversal: int, rows: int) -> np.ndarray:
    """RGB ``[H,W,3]`` uint8: ``rows`` frames of the traversal (evenly spaced) x cameras."""
    _, _, frames = render_traversal(seed, traversal, cfg)
    keep = set(np.linspace(0, cfg.frames - 1, rows).round().astype(int).tolist())
    lines = []
    for i, (_, _, rgb, _) in enumerate(frames):
        if i not in keep:
            continue
        tall = max(img.shape[0] for img in rgb.values())
        lines.append(np.concatenate(
            [np.pad(img, ((0, tall - img.shape[0]), (0, 2), (0, 0))) for img in rgb.values()], 1))
    width = max(line.shape[1] for line in lines)
    return np.concatenate([np.pad(line, ((0, 2), (0, width - line.shape[1]), (0, 0)))
                           for line in lines], 0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path, help="PNG to write")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--traversal", type=int, default=0)
    p.add_argument("--rows", type=int, default=3)
    p.add_argument("--frames", type=int, default=30, help="frames of the traversal")
    p.add_argument("--image-size", type=int, default=96)
    p.add_argument("--scene-preset", choices=sorted(SCENE_PRESETS), default="small")
    p.add_argument("--rig-preset", choices=sorted(RIG_PRESETS), default="ring4")
    for name, choices in CHOICES.items():
        p.add_argument(f"--{name}", choices=choices, default=choices[0])
    args = p.parse_args(argv)
    cfg = SimConfig(scene_preset=args.scene_preset, rig_preset=args.rig_preset,
                    traversals=args.traversal + 1, frames=args.frames,
                    image_size=args.image_size, with_depth=False, motion=args.motion,
                    textures=args.textures, lighting=args.lighting, exposure=args.exposure)
    img = montage(cfg, args.seed, args.traversal, args.rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(args.out), cv2.cvtColor(img, cv2.COLOR_RGB2BGR),
                [cv2.IMWRITE_PNG_COMPRESSION, 9])
    print(f"{args.out}: {img.shape[1]} x {img.shape[0]}, {args.out.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
