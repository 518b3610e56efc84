"""``g2g-train``: train the compact backbone (stage 1) or the G2G modules (reloc / rig).

Examples::

    g2g-train compact_pretrain                      # configs/compact_pretrain.yaml
    g2g-train reloc_compact --set optim.max_steps=3000
    g2g-train rig_compact --set model.init_from=outputs/reloc_compact/model.safetensors
    torchrun --nproc_per_node 4 -m g2g_model.training.cli reloc_paper   # DDP

Re-running the same command resumes from ``<out_dir>/state.pt``. Every configuration error (an
unknown preset, backbone or field, a missing dataset path, a checkpoint of another configuration,
an empty index) stops the command before any work starts.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from g2g_model.training.config import available_presets, load_config


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="g2g-train", description=__doc__.split("\n")[0])
    p.add_argument("config", nargs="?", help="preset name (configs/<name>.yaml) or YAML path")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.KEY=VALUE", help="override a config field (repeatable)")
    p.add_argument("--out", help="output directory (overrides out_dir)")
    p.add_argument("--no-resume", action="store_true", help="ignore an existing state.pt")
    p.add_argument("--list", action="store_true", help="list the presets and exit")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved config and exit (nothing is trained)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress bar (there is none when stderr is not a terminal)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.list or not args.config:
        print("\n".join(available_presets()))
        return 0 if args.list else 2
    overrides = list(args.overrides)
    if args.out:
        overrides.append(f"out_dir={args.out}")
    try:
        config = load_config(args.config, overrides)
    except ValueError as exc:
        print(f"g2g-train: error: {exc}", file=sys.stderr)
        return 2
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.print_config:
        print(json.dumps(config.to_dict(), indent=1))
        return 0
    from g2g_model.training.trainer import Trainer

    try:
        trainer = Trainer(config, resume=not args.no_resume,
                          progress=not args.quiet and sys.stderr.isatty())
    except ValueError as exc:
        print(f"g2g-train: error: {exc}", file=sys.stderr)
        return 2
    try:
        summary = trainer.run()
    finally:
        trainer.close()
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
