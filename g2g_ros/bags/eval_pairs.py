"""The pairs an evaluation replay evaluated, as a ``g2g-eval`` pair index.

``g2g-eval-bag --pairs-index`` writes them so that ``g2g-eval`` can score exactly the groups the
nodes used (same windows, same checkpoint: the same numbers):

* relocalize: one :class:`~g2g_model.data.mining.FramesPair` per ``GroupAlignment`` (one per
  accepted fix): group A = the map window (its camera, the frames of the map's source trajectory
  at ``stamps_a``), group B = the query window (the relocalization camera, the frames of the
  bag's source trajectory at ``stamps_b``);
* rig_odometry: one :class:`~g2g_model.data.mining.RigPair` per pair of consecutive odometry
  outputs (keyframes) of the bag's source trajectory. Note that ``g2g-eval-bag`` scores the
  node's fused odometry motion, ``g2g-eval`` the model's raw ``T_{A0<-Bj}``: these agree only
  where the node's fusion of the per-camera estimates changes nothing.

Frames are found by stamp: the bag and the map keep the dataset's time stamps (``g2g-bag
convert``, ``g2g-map build``). Trajectory paths are written relative to the collection root.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from g2g_model.data.format import TrajectoryReader
from g2g_model.data.mining import FramesPair, RigPair, write_index

LOG = logging.getLogger(__name__)
MAP_SOURCE_PREFIX = "g2g-map build "


def map_source_trajectory(map_path: str | Path) -> Path:
    """The trajectory a map was built from (its header's ``source``, ``g2g-map build <path>``)."""
    from g2g_model.maps.format import read_map_header

    source = str(read_map_header(map_path).get("source", ""))
    if not source.startswith(MAP_SOURCE_PREFIX):
        raise ValueError(f"map {map_path}: source {source!r} does not name a dataset trajectory "
                         f"(maps from g2g-map build do); pass the map's trajectory explicitly")
    return Path(source[len(MAP_SOURCE_PREFIX):])


def bag_source_trajectory(metadata: Dict[str, object], bag: str | Path) -> Path:
    """The trajectory a bag was converted from (metadata ``source_path`` of g2g-bag convert)."""
    source = metadata.get("source_path")
    if not source:
        raise ValueError(f"bag {bag}: metadata has no source_path (bags from g2g-bag convert "
                         f"have it); pass the bag's trajectory explicitly")
    return Path(str(source))


class FrameLookup:
    """Dataset frame index of a stamp in one trajectory (ValueError naming a missing stamp)."""

    def __init__(self, traj: str | Path, root: str | Path):
        self.path = Path(traj).resolve()
        self.reader = TrajectoryReader(self.path)
        self.rel = os.path.relpath(self.path, Path(root).resolve())
        if self.rel.startswith(".."):
            raise ValueError(f"trajectory {self.path} is not under the collection root {root}")
        self.index = {int(s): i for i, s in enumerate(self.reader.timestamps_ns)}

    def frames(self, stamps: Sequence[int]) -> List[int]:
        missing = [int(s) for s in stamps if int(s) not in self.index]
        if missing:
            raise ValueError(f"trajectory {self.path} has no frame at stamp(s) {missing[:5]} ns")
        return [self.index[int(s)] for s in stamps]


def relocalization_pairs(alignments: Sequence[object], query: FrameLookup, map_traj: FrameLookup,
                         query_camera: str) -> List[FramesPair]:
    """One FramesPair per GroupAlignment (see the module docstring)."""
    from g2g_ros.bags.alignment_fields import alignment_camera
    from g2g_ros.conversions import stamp_ns

    pairs = []
    for msg in alignments:
        frames_a = map_traj.frames([stamp_ns(t) for t in msg.stamps_a])
        frames_b = query.frames([stamp_ns(t) for t in msg.stamps_b])
        score = float(msg.overlap_score)
        pairs.append(FramesPair(map_traj.rel, alignment_camera(msg),
                                FramesPair.format_frames(frames_a), query.rel, query_camera,
                                FramesPair.format_frames(frames_b),
                                score if score == score else 1.0))   # NaN: unknown -> 1
    return pairs


def odometry_pairs_index(pair_stamps: Sequence[Sequence[int]], traj: FrameLookup
                         ) -> List[RigPair]:
    """One RigPair per consecutive pair of odometry outputs (``[[stamp_a, stamp_b], ...]``)."""
    import numpy as np

    poses = traj.reader.world_T_body
    pairs = []
    for sa, sb in pair_stamps:
        fa, fb = traj.frames([sa, sb])
        rel = np.linalg.inv(poses[fa]) @ poses[fb]
        yaw = float(np.degrees(abs(np.arctan2(rel[1, 0], rel[0, 0]))))
        pairs.append(RigPair(traj.rel, fa, traj.rel, fb,
                             float(np.linalg.norm(poses[fb][:3, 3] - poses[fa][:3, 3])), yaw))
    return pairs


def write_pairs_index(path: str | Path, root: str | Path, graph: str, bag: str | Path,
                      metadata: Dict[str, object], alignments: Sequence[object] = (),
                      odometry_pair_stamps: Sequence[Sequence[int]] = (),
                      query_camera: str = "", map_path: Optional[str | Path] = None,
                      query_traj: Optional[str | Path] = None,
                      map_traj: Optional[str | Path] = None) -> Path:
    """Write the replay's pairs to ``path`` (``.json`` or ``.csv``, see the module docstring).

    Raises:
        ValueError: no pair was evaluated, a trajectory cannot be found or is not under
            ``root``, or a stamp has no frame in it.
    """
    query = FrameLookup(query_traj or bag_source_trajectory(metadata, bag), root)
    if graph == "relocalize":
        if map_path is None:
            raise ValueError("graph 'relocalize' needs the map to write its pairs")
        lookup = FrameLookup(map_traj or map_source_trajectory(map_path), root)
        pairs = relocalization_pairs(alignments, query, lookup, query_camera)
        what = "accepted relocalizations (GroupAlignment)"
    else:
        pairs = odometry_pairs_index(odometry_pair_stamps, query)
        what = "odometry output pairs"
    if not pairs:
        raise ValueError(f"no {what} to write to {path}: the replay evaluated no pair")
    out = write_index(pairs, path)
    LOG.info("wrote %d pairs to %s (g2g-eval --task %s --root %s --index %s)", len(pairs), out,
             "reloc" if graph == "relocalize" else "rig", root, out)
    return out
