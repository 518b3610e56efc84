"""ROS 1 bag -> rosbag2 MCAP bag of the G2G layout (``g2g-bag from-ros1``).

``rosbags`` reads the ROS 1 bag (its own message definitions); a :class:`~.ros1_topics.TopicMap`
says which image topics make the rig, which frame is the body and where the ground truth and
the odometry input are. The output has the layout of :mod:`.convert` (what the nodes,
``g2g-bag play`` and ``g2g-eval-bag`` read):

* per rig group, at the log time of the reference (first) camera's image stamp: each camera's
  ``<cam>/image_raw`` (or ``<cam>/image_raw/compressed``: the bag's bytes, not re-encoded) with
  its own header stamp, frame ``<cam>_optical_frame``, and ``<cam>/camera_info`` (the bag's
  latest one, or the calibration file's); ``/tf`` with the odometry input ``odom -> base_link``
  and the ground truth ``gt_world -> gt_base_link``, and ``ground_truth/odometry``, both
  interpolated at the group's stamp (left out where the source does not cover it);
* once: ``/tf_static`` ``base_link -> <cam>_optical_frame`` (the calibration file's, or the
  bag's TF ``body_frame -> <image frame_id>``) and ``/g2g/metadata``.

Images of the other cameras within ``sync_slop_ms`` of a reference stamp join its group, so the
player publishes a rig group together; the others ("unmatched") stay at their own stamp and are
counted in the metadata. Other topics (IMU, the bag's own TF tree) are not copied: the nodes'
TF tree is ``odom -> base_link -> <cam>_optical_frame``.
"""

from __future__ import annotations

import bisect
import datetime
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
from tqdm import tqdm

from g2g_model.data.pose_interp import interpolate_poses
from g2g_ros.bags.bag_reader import BagError
from g2g_ros.bags.bag_writer import G2GBagWriter
from g2g_ros.bags.convert import ConvertSummary
from g2g_ros.bags.ros1_topics import (
    IMAGE_TYPES, ROS1_TF, ROS1_TF_STATIC, TF_TYPES, PoseSource, TopicMap,
)
from g2g_ros.bags.typestore import GT_BASE_FRAME, GT_WORLD_FRAME
from g2g_ros.conversions import header_ns, pose_to_matrix, to_stamp
from g2g_ros.tf_buffer import TFBuffer, TFError

LOG = logging.getLogger(__name__)


def open_ros1(path: str | Path):
    """An open ``rosbags`` reader of the ROS 1 bag file ``path`` (BagError when unusable)."""
    from rosbags.highlevel import AnyReader

    path = Path(path)
    if not path.is_file():
        raise BagError(f"ROS 1 bag {path} does not exist (or is not a file)")
    reader = AnyReader([path])
    try:
        reader.open()
    except Exception as exc:  # rosbags raises several types for damaged or other files
        raise BagError(f"ROS 1 bag {path} cannot be read (not a ROS 1 bag, or corrupt): "
                       f"{type(exc).__name__}: {exc}") from exc
    return reader


@dataclass
class _Scan:
    """What the first pass over the bag learns (everything but the image data)."""

    image_stamps: Dict[str, List[int]] = field(default_factory=lambda: defaultdict(list))
    image_frames: Dict[str, str] = field(default_factory=dict)
    image_sizes: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    infos: Dict[str, List[Tuple[int, object]]] = field(default_factory=lambda: defaultdict(list))
    odometry: Dict[str, List[Tuple[int, str, np.ndarray]]] = field(
        default_factory=lambda: defaultdict(list))
    tf: Optional[TFBuffer] = None
    counts: Dict[str, int] = field(default_factory=lambda: defaultdict(int))


def _scan(reader, tmap: TopicMap, where: str) -> _Scan:
    image_cam = {c.image: c.name for c in tmap.cameras}
    info_cam = {c.info_topic(): c.name for c in tmap.cameras if not tmap.calibrated(c.name)}
    odo_topics = {s.odometry for s in (tmap.ground_truth, tmap.odometry) if s.odometry}
    wanted = set(image_cam) | (set(info_cam) & set(reader.topics)) | odo_topics | {
        t for t in (ROS1_TF, ROS1_TF_STATIC) if t in reader.topics}
    scan = _Scan()
    span = max(int(reader.end_time) - int(reader.start_time), 0)
    scan.tf = TFBuffer(cache_duration_ns=span + 10**9)
    conns = [c for c in reader.connections if c.topic in wanted]
    for conn, log_ns, raw in reader.messages(connections=conns):
        topic = conn.topic
        try:
            msg = reader.deserialize(raw, conn.msgtype)
        except Exception as exc:
            raise BagError(f"ROS 1 bag {where}: a {topic} message cannot be decoded: "
                           f"{exc}") from exc
        scan.counts[topic] += 1
        if topic in image_cam:
            cam = image_cam[topic]
            scan.image_stamps[cam].append(header_ns(msg.header))
            scan.image_frames.setdefault(cam, str(msg.header.frame_id))
            if hasattr(msg, "width"):
                scan.image_sizes.setdefault(cam, (int(msg.width), int(msg.height)))
        if topic in info_cam:
            scan.infos[info_cam[topic]].append((int(log_ns), msg))
        if topic in odo_topics:
            scan.odometry[topic].append((header_ns(msg.header), str(msg.child_frame_id),
                                         pose_to_matrix(msg.pose.pose)))
        if topic in (ROS1_TF, ROS1_TF_STATIC) and conn.msgtype in TF_TYPES:
            scan.tf.ingest(msg, static=topic == ROS1_TF_STATIC)
    return scan


def _groups(tmap: TopicMap, scan: _Scan) -> Tuple[Dict[Tuple[str, int], int], int]:
    """``(camera, image stamp) -> group stamp`` and the number of unmatched images."""
    ref = tmap.names[0]
    ref_stamps = sorted(set(scan.image_stamps[ref]))
    group = {(ref, s): s for s in ref_stamps}
    unmatched = 0
    for cam in tmap.names[1:]:
        for s in scan.image_stamps[cam]:
            i = bisect.bisect_left(ref_stamps, s)
            near = [ref_stamps[j] for j in (i - 1, i) if 0 <= j < len(ref_stamps)]
            best = min(near, key=lambda r: abs(r - s), default=None)
            if best is not None and abs(best - s) <= tmap.sync_slop_ns:
                group[(cam, s)] = best
            else:
                group[(cam, s)] = s
                unmatched += 1
    return group, unmatched


def _tf_frames(tf: TFBuffer) -> List[str]:
    return sorted(tf.frames())


def _source_poses(src: PoseSource, tmap: TopicMap, scan: _Scan, query: np.ndarray,
                  max_gap_ns: int, where: str) -> Dict[int, np.ndarray]:
    """``stamp -> world_T_body`` of ``src`` at the ``query`` stamps it covers."""
    body = tmap.body_frame
    if src.tf:
        out = {}
        for stamp in query:
            try:
                out[int(stamp)] = scan.tf.lookup_transform(src.tf, body, int(stamp))
            except TFError as exc:
                if not scan.tf.can_transform(src.tf, body, 0):
                    raise BagError(f"ROS 1 bag {where}: no TF chain {src.tf} -> {body} ({exc}); "
                                   f"TF frames in the bag: {_tf_frames(scan.tf)}") from exc
        return out
    samples = sorted({s: (c, T) for s, c, T in scan.odometry[src.odometry]}.items())
    if len(samples) < 2:
        raise BagError(f"ROS 1 bag {where}: {src.odometry} has {len(samples)} message(s); "
                       f"interpolating poses needs at least 2")
    child = samples[0][1][0]
    child_T_body = np.eye(4)
    if child and child != body:
        try:
            child_T_body = scan.tf.lookup_transform(child, body, 0)
        except TFError as exc:
            raise BagError(f"ROS 1 bag {where}: {src.odometry} gives the pose of {child!r}, "
                           f"not of the body frame {body!r}, and the bag's TF has no "
                           f"{child} -> {body} ({exc}); TF frames: {_tf_frames(scan.tf)}"
                           ) from exc
    stamps = np.array([s for s, _ in samples], dtype=np.int64)
    poses = np.stack([T for _, (_, T) in samples]) @ child_T_body
    interp, valid = interpolate_poses(stamps, poses, query, max_gap_ns)
    return {int(s): P for s, P, ok in zip(query, interp, valid) if ok}


def _extrinsics(tmap: TopicMap, scan: _Scan, where: str) -> Dict[str, np.ndarray]:
    """``camera -> T_body_cam`` (calibration file, else the bag's TF at its latest time)."""
    out = {}
    for cam in tmap.names:
        if tmap.calibrated(cam):
            out[cam] = tmap.calibration[cam].T_body_cam
            continue
        frame = scan.image_frames.get(cam, "")
        try:
            out[cam] = scan.tf.lookup_transform(tmap.body_frame, frame, 0)
        except TFError as exc:
            raise BagError(f"ROS 1 bag {where}: no extrinsics for camera {cam}: the TF "
                           f"{tmap.body_frame} -> {frame!r} (its images' frame_id) is not in "
                           f"the bag ({exc}); TF frames in the bag: {_tf_frames(scan.tf)}. "
                           f"List the camera in a calibration file") from exc
    return out


def _info_from_calibration(tmap: TopicMap, cam: str):
    """The rclpy ``CameraInfo`` of a camera of the calibration file (stamp/frame set later)."""
    from sensor_msgs.msg import CameraInfo

    spec = tmap.calibration[cam]
    # A pinhole is written as plumb_bob without coefficients (what ROS drivers publish).
    info = CameraInfo(width=spec.width, height=spec.height,
                      distortion_model=spec.distortion_model or "plumb_bob")
    info.d = [float(v) for v in spec.distortion_coefficients]
    info.k = [float(v) for v in spec.K.reshape(-1)]
    info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    info.p = [float(v) for v in np.hstack([spec.K, np.zeros((3, 1))]).reshape(-1)]
    return info


def _info_from_ros1(msg):
    """ROS 1 ``sensor_msgs/CameraInfo`` (``D, K, R, P``) -> rclpy's (``d, k, r, p``)."""
    from sensor_msgs.msg import CameraInfo, RegionOfInterest

    def arr(name):
        value = getattr(msg, name, None)
        return [float(v) for v in (getattr(msg, name.lower()) if value is None else value)]

    roi = msg.roi
    return CameraInfo(width=int(msg.width), height=int(msg.height),
                      distortion_model=str(msg.distortion_model), d=arr("D"), k=arr("K"),
                      r=arr("R"), p=arr("P"), binning_x=int(msg.binning_x),
                      binning_y=int(msg.binning_y),
                      roi=RegionOfInterest(x_offset=int(roi.x_offset), y_offset=int(roi.y_offset),
                                           height=int(roi.height), width=int(roi.width),
                                           do_rectify=bool(roi.do_rectify)))


def _image_from_ros1(msg, frame: str):
    """ROS 1 ``Image`` / ``CompressedImage`` -> rclpy's, header frame replaced, bytes kept."""
    from sensor_msgs.msg import CompressedImage, Image

    if hasattr(msg, "format"):
        out = CompressedImage(format=str(msg.format), data=bytes(msg.data))
    else:
        out = Image(height=int(msg.height), width=int(msg.width), encoding=str(msg.encoding),
                    is_bigendian=int(msg.is_bigendian), step=int(msg.step),
                    data=bytes(msg.data))
    out.header.stamp = to_stamp(header_ns(msg.header))
    out.header.frame_id = frame
    return out


def _check_scan(tmap: TopicMap, scan: _Scan, where: str) -> None:
    """Every camera has images and a calibration whose size is the images'."""
    for cam in tmap.cameras:
        if not scan.image_stamps[cam.name]:
            raise BagError(f"ROS 1 bag {where}: no images on {cam.image} (camera {cam.name})")
        if not tmap.calibrated(cam.name) and not scan.infos[cam.name]:
            raise BagError(f"ROS 1 bag {where}: no messages on {cam.info_topic()} (camera_info "
                           f"of camera {cam.name}); list the camera in a calibration file")
    for cam, (w, h) in scan.image_sizes.items():
        if tmap.calibrated(cam):
            size = tmap.calibration[cam].size
        elif scan.infos[cam]:
            size = (int(scan.infos[cam][0][1].width), int(scan.infos[cam][0][1].height))
        else:
            continue
        if size != (w, h):
            raise BagError(f"ROS 1 bag {where}: camera {cam}'s images are {w}x{h} but its "
                           f"calibration says {size[0]}x{size[1]}")


def convert_ros1(bag: str | Path, out: str | Path, tmap: TopicMap, start_s: float = 0.0,
                 duration_s: Optional[float] = None, gt_max_gap_s: float = 1.0,
                 progress: bool = True) -> ConvertSummary:
    """Convert the ROS 1 bag file ``bag`` into the bag directory ``out`` (module docstring).

    ``start_s`` / ``duration_s``: the rig groups kept, in seconds after the first one.
    ``gt_max_gap_s``: ground truth (and odometry) from an Odometry topic is interpolated only
    between samples at most this far apart.

    Raises:
        BagError: the bag cannot be read or lacks what the map names (the message lists the
            bag's topics or TF frames).
        ValueError: bad arguments, ``out`` exists.
    """
    out = Path(out)
    if out.exists():
        raise ValueError(f"output {out} already exists; choose a new bag path")
    if start_s < 0 or (duration_s is not None and duration_s <= 0) or gt_max_gap_s <= 0:
        raise ValueError(f"need start_s >= 0, duration_s > 0, gt_max_gap_s > 0; got "
                         f"{start_s}, {duration_s}, {gt_max_gap_s}")
    where = str(bag)
    reader = open_ros1(bag)
    try:
        tmap.check({t: i.msgtype for t, i in reader.topics.items()}, where)
        return _convert(reader, Path(bag), out, tmap, start_s, duration_s, gt_max_gap_s,
                        progress)
    finally:
        reader.close()


def _convert(reader, bag: Path, out: Path, tmap: TopicMap, start_s: float,
             duration_s: Optional[float], gt_max_gap_s: float, progress: bool
             ) -> ConvertSummary:
    where = str(bag)
    scan = _scan(reader, tmap, where)
    _check_scan(tmap, scan, where)
    group_of, unmatched = _groups(tmap, scan)
    all_groups = sorted(set(group_of.values()))
    t0 = all_groups[0] + int(round(start_s * 1e9))
    t1 = None if duration_s is None else t0 + int(round(duration_s * 1e9))
    groups = [g for g in all_groups if g >= t0 and (t1 is None or g <= t1)]
    if not groups:
        raise BagError(f"ROS 1 bag {where}: no rig group between {start_s} s and "
                       f"{start_s + (duration_s or 0)} s after the first image")
    query = np.array(groups, dtype=np.int64)
    gap = int(gt_max_gap_s * 1e9)
    gt = _source_poses(tmap.ground_truth, tmap, scan, query, gap, where)
    odom = gt
    if not tmap.odometry.ground_truth:
        odom = _source_poses(tmap.odometry, tmap, scan, query, gap, where)
    extrinsics = _extrinsics(tmap, scan, where)
    members: Dict[int, int] = defaultdict(int)
    for g in group_of.values():
        members[g] += 1
    source_counts = {t: int(n) for t, n in sorted(scan.counts.items())}
    meta = {
        "format": "g2g-bag", "version": 1, "dataset": f"ros1:{bag.stem}",
        "date": datetime.datetime.fromtimestamp(groups[0] / 1e9,
                                                tz=datetime.timezone.utc).isoformat(),
        "cameras": tmap.names, "source_path": str(bag.resolve()), "source": "ros1",
        "num_frames": len(groups), "compressed": _compressed(reader, tmap),
        "odometry": {"source": tmap.odometry.describe()},
        "ground_truth": {"source": tmap.ground_truth.describe(),
                         "frames_with_ground_truth": len(gt)},
        "ground_truth_frames": [GT_WORLD_FRAME, GT_BASE_FRAME],
        "topic_map": tmap.to_dict(), "source_counts": source_counts,
        "unmatched_images": unmatched, "window_s": [start_s, duration_s],
    }
    if unmatched:
        LOG.warning("%d image(s) had no reference-camera image within sync_slop_ms=%.1f; they "
                    "stay at their own stamps", unmatched, tmap.sync_slop_ns / 1e6)
    with G2GBagWriter(out, meta) as writer:
        _write(reader, writer, tmap, scan, group_of, groups, members, gt, odom, extrinsics,
               progress, where)
    LOG.info("wrote %s: %d groups (%d with ground truth), cameras %s", out, len(groups),
             len(gt), tmap.names)
    return ConvertSummary(str(out), len(groups), tmap.names, writer.counts, meta)


def _compressed(reader, tmap: TopicMap) -> bool:
    return reader.topics[tmap.cameras[0].image].msgtype == IMAGE_TYPES[1]


def _write(reader, writer: G2GBagWriter, tmap: TopicMap, scan: _Scan,
           group_of: Dict[Tuple[str, int], int], groups: List[int], members: Dict[int, int],
           gt: Dict[int, np.ndarray], odom: Dict[int, np.ndarray],
           extrinsics: Dict[str, np.ndarray], progress: bool, where: str) -> None:
    """Second pass: the images, grouped and in group order, with everything per group."""
    compressed = _compressed(reader, tmap)
    suffix = "/image_raw/compressed" if compressed else "/image_raw"
    c_img = {c: writer.add(f"{c}{suffix}", IMAGE_TYPES[1] if compressed else IMAGE_TYPES[0])
             for c in tmap.names}
    c_info = {c: writer.add(f"{c}/camera_info", "sensor_msgs/msg/CameraInfo")
              for c in tmap.names}
    calibrated = {c: _info_from_calibration(tmap, c) for c in tmap.names if tmap.calibrated(c)}
    info_logs = {c: [t for t, _ in scan.infos[c]] for c in scan.infos}
    kept = set(groups)
    writer.write_start(groups[0], {f"{c}_optical_frame": extrinsics[c] for c in tmap.names})
    image_cam = {c.image: c.name for c in tmap.cameras}
    conns = [c for c in reader.connections if c.topic in image_cam]
    pending: Dict[int, List[Tuple[str, int, object]]] = defaultdict(list)
    seen = set()
    nxt = 0

    def info_for(cam: str, log_ns: int, stamp: int):
        if cam in calibrated:
            info = calibrated[cam]
        else:   # the latest camera_info received before the image (else the first one)
            i = max(bisect.bisect_right(info_logs[cam], log_ns) - 1, 0)
            info = _info_from_ros1(scan.infos[cam][i][1])
        info.header.stamp = to_stamp(stamp)
        info.header.frame_id = f"{cam}_optical_frame"
        return info

    def flush():
        nonlocal nxt
        while nxt < len(groups) and len(pending[groups[nxt]]) == members[groups[nxt]]:
            g = groups[nxt]
            writer.write_poses(g, odom.get(g), gt.get(g))
            for cam, log_ns, msg in sorted(pending.pop(g), key=lambda m: tmap.names.index(m[0])):
                img = _image_from_ros1(msg, f"{cam}_optical_frame")
                writer.write(c_info[cam], g, info_for(cam, log_ns, header_ns(msg.header)))
                writer.write(c_img[cam], g, img)
            nxt += 1

    total = sum(scan.counts[t] for t in image_cam)
    for conn, log_ns, raw in tqdm(reader.messages(connections=conns), total=total,
                                  desc=f"convert {Path(where).name}", unit="image",
                                  disable=not progress):
        cam = image_cam[conn.topic]
        msg = reader.deserialize(raw, conn.msgtype)
        stamp = header_ns(msg.header)
        g = group_of[(cam, stamp)]
        if g not in kept or (cam, stamp) in seen:   # outside the window, or a duplicate
            continue
        seen.add((cam, stamp))
        pending[g].append((cam, int(log_ns), msg))
        flush()
    flush()
    if nxt != len(groups):
        raise BagError(f"ROS 1 bag {where}: the second pass did not find every "
                       f"image of the first (group {groups[nxt]}); was the file modified?")
