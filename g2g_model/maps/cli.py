"""`g2g-map build | info | verify | reseal`: make and check map artefacts (see
:mod:`g2g_model.maps.format`).

``build`` takes keyframes of a dataset trajectory (g2g_model.data format) with its ground-truth
poses, encodes every keyframe once with the model's backbone and writes the map atomically.
``reseal`` adds the header checksum to a map written before maps carried one, after checking
the whole map (it never re-seals a header that does not match its checksum).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from g2g_model.maps.building import KEYFRAME_MAX_PX, build_map_from_trajectory
from g2g_model.maps.format import MapError, load_map, read_map_header, reseal_map, save_map

LOG = logging.getLogger(__name__)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="g2g-map", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build a map from a dataset trajectory")
    build.add_argument("trajectory")
    build.add_argument("out", help="output .g2gmap file")
    build.add_argument("--cameras", nargs="*", default=None)
    build.add_argument("--min-translation", type=float, default=0.2)
    build.add_argument("--min-rotation", type=float, default=10.0)
    build.add_argument("--keyframe-max-px", type=int, default=KEYFRAME_MAX_PX,
                       help="long side the keyframes are stored at (relocalization's "
                       "verification size; 0: as recorded)")
    build.add_argument("--checkpoint", default="", help="G2G checkpoint (default: embedded)")
    build.add_argument("--backbone-weights", default="",
                       help="backbone weights the checkpoint needs (a converted official "
                            "release: its MapAnything folder)")
    build.add_argument("--device", default="cpu")
    info = sub.add_parser("info", help="print a map's header")
    info.add_argument("map")
    verify = sub.add_parser("verify", help="fully load and check a map (checksums, backbone)")
    verify.add_argument("map")
    verify.add_argument("--checkpoint", default="",
                        help="also check the map matches this model's backbone")
    verify.add_argument("--backbone-weights", default="",
                        help="backbone weights the checkpoint needs (as for build)")
    reseal = sub.add_parser("reseal", help="add the header checksum to a map written before "
                                           "maps carried one (checked first, rewritten "
                                           "atomically)")
    reseal.add_argument("map")
    opts = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if opts.command == "build":
            from g2g_model.estimation.pipeline import G2GPipeline

            if opts.backbone_weights and not opts.checkpoint:
                raise ValueError("--backbone-weights needs --checkpoint")
            pipeline = (G2GPipeline.from_checkpoint(
                opts.checkpoint, device=opts.device,
                backbone_weights=opts.backbone_weights or None)
                if opts.checkpoint else G2GPipeline.default("relocalization", opts.device))
            gmap = build_map_from_trajectory(opts.trajectory, pipeline, opts.cameras,
                                             opts.min_translation, opts.min_rotation,
                                             keyframe_max_px=opts.keyframe_max_px)
            path = save_map(gmap, opts.out)
            print(f"wrote {path}: {len(gmap)} keyframes of {gmap.cameras()}")
        elif opts.command == "info":
            header = read_map_header(opts.map)
            frames = header.pop("frames")
            header.pop("sha256", None)
            header["header_checksum"] = "yes" if header.pop("header_sha256", None) else \
                "none (g2g-map reseal adds it)"
            header["num_frames"] = len(frames)
            header["cameras"] = sorted({f["camera"] for f in frames})
            print(json.dumps(header, indent=2))
        elif opts.command == "reseal":
            done = reseal_map(opts.map)
            print(f"{'re-sealed' if done else 'already sealed, unchanged'}: {opts.map}")
        else:
            expect = None
            if opts.checkpoint:
                from g2g_model.estimation.pipeline import G2GPipeline

                expect = G2GPipeline.from_checkpoint(
                    opts.checkpoint, backbone_weights=opts.backbone_weights or None
                ).backbone_id()
            gmap = load_map(opts.map, expect_backbone=expect)
            print(f"OK: {opts.map}: {len(gmap)} frames, checksums verified"
                  + ("" if gmap.sealed else " (no header checksum: g2g-map reseal adds it)")
                  + (", backbone matches" if expect else ""))
    except (MapError, ValueError, FileNotFoundError) as exc:
        print(f"g2g-map: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
