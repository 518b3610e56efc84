"""Command-line tools for the G2G modules (thin wrappers over the library functions).

``g2g-model info --preset paper --frames 5``     config + trainable parameters per module
``g2g-model info --checkpoint model.safetensors`` header + parameters of a checkpoint
``g2g-convert IN.pth OUT.safetensors --frames 5`` official release -> our checkpoint format
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import List, Optional

from g2g_model.model.checkpoint import OFFICIAL_BACKBONE, convert_official, load_any
from g2g_model.model.config import PRESETS, preset
from g2g_model.model.g2g import G2GModel, count_parameters


def format_counts(counts: dict) -> str:
    width = max(len(k) for k in counts)
    return "\n".join(f"  {name:<{width}}  {value:>12,}" for name, value in counts.items())


def describe(model: G2GModel, title: str) -> str:
    lines = [title]
    lines += [f"  {k}: {v}" for k, v in model.config.to_dict().items()]
    lines.append("trainable parameters:")
    lines.append(format_counts(count_parameters(model)))
    return "\n".join(lines)


def _info(args: argparse.Namespace) -> int:
    if args.checkpoint:
        if any(v is not None for v in (args.preset, args.frames, args.input_dim)):
            raise ValueError("--checkpoint cannot be combined with --preset/--frames/--input-dim")
        loaded = load_any(args.checkpoint, num_heads=args.heads)
        header = loaded.header
        if args.json:
            print(json.dumps({"header": header,
                              "parameters": count_parameters(loaded.model)}, indent=1))
            return 0
        print(f"checkpoint: {args.checkpoint}")
        print(json.dumps({k: v for k, v in header.items() if k != "config"}, indent=1,
                         sort_keys=True))
        print(describe(loaded.model, "config:"))
        return 0
    overrides = {}
    if args.frames is not None:
        overrides["max_frames"] = args.frames
    if args.input_dim is not None:
        overrides["input_dim"] = args.input_dim
    name = args.preset or "paper"
    model = G2GModel(preset(name, **overrides))
    if args.json:
        print(json.dumps({"preset": name, "config": model.config.to_dict(),
                          "parameters": count_parameters(model)}, indent=1))
    else:
        print(describe(model, f"G2G preset {name!r}:"))
    return 0


def _run(parser: argparse.ArgumentParser, argv: Optional[List[str]], handler) -> int:
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING)
    try:
        return handler(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main(argv: Optional[List[str]] = None) -> int:
    """``g2g-model``: inspect presets and checkpoints."""
    parser = argparse.ArgumentParser(prog="g2g-model", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="print a config and its trainable parameter counts")
    info.add_argument("--preset", choices=sorted(PRESETS), help="named size (default paper)")
    info.add_argument("--frames", type=int, help="max frames per group W")
    info.add_argument("--input-dim", type=int, help="backbone feature width D_in")
    info.add_argument("--checkpoint", help="a G2G checkpoint or official weights file")
    info.add_argument("--heads", type=int,
                      help="attention heads of an official weights file (default 8, as released)")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(handler=_info)
    return _run(parser, argv, lambda args: args.handler(args))


def _convert(args: argparse.Namespace) -> int:
    if os.path.exists(args.output) and not args.force:
        raise ValueError(f"{args.output!r} exists; pass --force to overwrite it")
    header = convert_official(args.input, args.output, args.frames, args.heads, args.backbone)
    print(f"wrote {args.output}: preset {header['preset']}, "
          f"max_frames {header['config']['max_frames']}, {header['tensors']['g2g']} tensors")
    return 0


def convert_main(argv: Optional[List[str]] = None) -> int:
    """``g2g-convert``: official release (.pth) -> our safetensors checkpoint."""
    parser = argparse.ArgumentParser(
        prog="g2g-convert",
        description="Convert official G2G weights (.pth, read with weights_only=True) into a "
                    "G2G safetensors checkpoint.")
    parser.add_argument("input", help="official G2G-only .pth or full training checkpoint")
    parser.add_argument("output", help="output .safetensors")
    parser.add_argument("--frames", type=int,
                        help="expected max frames per group W (4, 5 or 8 in the releases); "
                             "checked against the file")
    parser.add_argument("--heads", type=int, help="attention heads (default 8, as released)")
    parser.add_argument("--backbone", default=OFFICIAL_BACKBONE,
                        help=f"backbone name recorded in the header (default {OFFICIAL_BACKBONE})")
    parser.add_argument("--force", action="store_true", help="overwrite the output")
    parser.add_argument("--verbose", action="store_true")
    return _run(parser, argv, _convert)


if __name__ == "__main__":
    sys.exit(main())
