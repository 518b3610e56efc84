"""The topic map of a ROS 1 bag conversion (``g2g-bag from-ros1``): which image topics make the
rig, which frame is the body, where the ground truth and the odometry input are.

Given as a YAML file and/or command-line flags (the flags win)::

    body_frame: camera_pose_frame          # the bag's body frame; it becomes base_link
    cameras:                               # rig order: the first is the reference camera
      - name: fisheye1                     # -> fisheye1/image_raw, fisheye1/camera_info, ...
        image: /camera/fisheye1/image_raw  # sensor_msgs/Image or CompressedImage
        camera_info: /camera/fisheye1/camera_info   # optional (default: beside the image)
      - name: fisheye2
        image: /camera/fisheye2/image_raw
    calibration: t265_calibration.yaml     # optional, relative to this file (below)
    ground_truth:
      odometry: /camera/odom/sample        # nav_msgs/Odometry of the body (or of a frame
                                           # rigidly attached to it through the bag's TF)
      # or   tf: world                     # the TF chain world -> body_frame on /tf
    odometry: ground_truth                 # the odom -> base_link input: ground_truth (default),
                                           # {odometry: TOPIC} or {tf: ODOM_FRAME}
    sync_slop_ms: 0                        # images within this of the reference camera's
                                           # stamp form one rig group (0: equal stamps)

``calibration`` is a calibration file of the nodes (:func:`g2g_model.data.rig.load_rig` with
``calibration=True``: per camera ``width, height, K`` and ``T_base_cam`` or ``translation`` +
``rotation_xyzw``, camera to body) with two optional keys per camera: ``distortion_model``
(``plumb_bob``, ``rational_polynomial``, ``equidistant``, ...) and
``distortion_coefficients``. A camera it lists takes its ``camera_info`` and its extrinsics
from it; the other cameras take them from the bag (``camera_info`` topic; TF
``body_frame -> <the image's frame_id>``).

:meth:`TopicMap.check` compares the map with a bag's topics and raises :class:`BagError` naming
what is missing and listing what the bag has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import yaml

from g2g_model.data.rig import Rig, load_rig
from g2g_ros.bags.bag_reader import BagError

IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
ODOMETRY_TYPE = "nav_msgs/msg/Odometry"
CAMERA_INFO_TYPE = "sensor_msgs/msg/CameraInfo"
#: TF message types of ROS 1 bags (tf2 and the older tf package).
TF_TYPES = ("tf2_msgs/msg/TFMessage", "tf/msg/tfMessage")
ROS1_TF = "/tf"
ROS1_TF_STATIC = "/tf_static"


@dataclass(frozen=True)
class PoseSource:
    """Where poses of the body come from: an ``nav_msgs/Odometry`` topic, or the TF chain
    ``frame -> body_frame``; ``ground_truth`` (odometry input only) reuses the ground truth."""

    odometry: Optional[str] = None
    tf: Optional[str] = None
    ground_truth: bool = False

    @classmethod
    def parse(cls, value: Any, what: str, allow_ground_truth: bool) -> "PoseSource":
        if value == "ground_truth" and allow_ground_truth:
            return cls(ground_truth=True)
        if not isinstance(value, Mapping) or len(value) != 1 or not (
                set(value) <= {"odometry", "tf"}) or not value[next(iter(value))]:
            choices = "{odometry: TOPIC} or {tf: FRAME}" + (
                " or ground_truth" if allow_ground_truth else "")
            raise ValueError(f"topic map: {what} must be {choices}, got {value!r}")
        key = next(iter(value))
        return cls(**{key: str(value[key])})

    def describe(self) -> str:
        if self.ground_truth:
            return "the ground truth"
        return f"Odometry topic {self.odometry}" if self.odometry else f"TF from {self.tf}"


@dataclass(frozen=True)
class CameraTopics:
    """One camera of the rig: its name in the converted bag and its topics in the ROS 1 bag
    (``camera_info`` None: ``<namespace of image>/camera_info`` when the bag has it)."""

    name: str
    image: str
    camera_info: Optional[str] = None

    def info_topic(self) -> str:
        if self.camera_info:
            return self.camera_info
        parts = self.image.rstrip("/").split("/")
        if parts[-1] == "compressed":
            parts = parts[:-1]
        return "/".join(parts[:-1] + ["camera_info"])


@dataclass
class TopicMap:
    """See the module docstring. ``calibration``: the parsed calibration file (or None; its
    cameras carry their lens distortion)."""

    cameras: List[CameraTopics]
    body_frame: str
    ground_truth: PoseSource
    odometry: PoseSource = field(default_factory=lambda: PoseSource(ground_truth=True))
    sync_slop_ns: int = 0
    calibration: Optional[Rig] = None
    calibration_path: Optional[str] = None

    def __post_init__(self) -> None:
        if not self.cameras:
            raise ValueError("topic map: no cameras (give cameras: in the file or --camera "
                             "NAME=TOPIC)")
        names = [c.name for c in self.cameras]
        if len(set(names)) != len(names):
            raise ValueError(f"topic map: camera names must be unique, got {names}")
        for name in names:
            if not name or "/" in name or name.startswith("_"):
                raise ValueError(f"topic map: camera name {name!r} is not a topic namespace")
        images = [c.image for c in self.cameras]
        if len(set(images)) != len(images):
            raise ValueError(f"topic map: each camera needs its own image topic, got {images}")
        if not self.body_frame:
            raise ValueError("topic map: body_frame is required (the bag's frame of the robot "
                             "body; it becomes base_link)")
        if self.ground_truth.ground_truth:
            raise ValueError("topic map: ground_truth must be an Odometry topic or a TF frame")
        if self.sync_slop_ns < 0:
            raise ValueError(f"topic map: sync_slop_ms must be >= 0, got "
                             f"{self.sync_slop_ns / 1e6}")

    @property
    def names(self) -> List[str]:
        return [c.name for c in self.cameras]

    def calibrated(self, name: str) -> bool:
        return self.calibration is not None and name in self.calibration.names

    def to_dict(self) -> Dict[str, object]:
        """What the converted bag's metadata records."""
        def source(s: PoseSource):
            return "ground_truth" if s.ground_truth else (
                {"odometry": s.odometry} if s.odometry else {"tf": s.tf})

        return {"body_frame": self.body_frame,
                "cameras": [{"name": c.name, "image": c.image,
                             "camera_info": "calibration" if self.calibrated(c.name)
                             else c.info_topic()} for c in self.cameras],
                "calibration": self.calibration_path,
                "ground_truth": source(self.ground_truth), "odometry": source(self.odometry),
                "sync_slop_ms": self.sync_slop_ns / 1e6}

    def check(self, topics: Mapping[str, str], where: str) -> None:
        """Raise :class:`BagError` unless the bag (``topic -> message type``) has what the map
        needs: the image topics (image types), a camera_info topic for every camera the
        calibration does not list, the ground truth's and the odometry's topics."""
        listing = ", ".join(f"{t} ({m})" for t, m in sorted(topics.items()))
        problems = []

        def need(topic: str, types: Sequence[str], why: str) -> None:
            if topic not in topics:
                problems.append(f"{topic} ({why}) is missing")
            elif topics[topic] not in types:
                problems.append(f"{topic} ({why}) is a {topics[topic]}, not {' or '.join(types)}")

        for cam in self.cameras:
            need(cam.image, IMAGE_TYPES, f"images of camera {cam.name}")
            if self.calibrated(cam.name):
                continue
            need(cam.info_topic(), (CAMERA_INFO_TYPE,),
                 f"camera_info of camera {cam.name}; or list the camera in a calibration file")
        for what, src in (("ground truth", self.ground_truth), ("odometry", self.odometry)):
            if src.odometry:
                need(src.odometry, (ODOMETRY_TYPE,), what)
            elif src.tf and ROS1_TF not in topics:
                problems.append(f"{ROS1_TF} ({what}: TF {src.tf} -> {self.body_frame}) is "
                                f"missing")
        kinds = {topics.get(c.image) for c in self.cameras} & set(IMAGE_TYPES)
        if len(kinds) > 1:
            problems.append("the cameras mix raw and compressed images (the nodes take one "
                            "transport for all cameras)")
        if problems:
            raise BagError(f"ROS 1 bag {where}: " + "; ".join(problems)
                           + f". The bag has: {listing}")


def _camera(entry: Any, index: int, where: str) -> CameraTopics:
    if isinstance(entry, str) and "=" in entry:      # NAME=TOPIC from the command line
        name, topic = entry.split("=", 1)
        return CameraTopics(name.strip(), topic.strip())
    if not isinstance(entry, Mapping) or not entry.get("name") or not entry.get("image"):
        raise ValueError(f"{where}: cameras[{index}] needs name and image, got {entry!r}")
    unknown = set(entry) - {"name", "image", "camera_info"}
    if unknown:
        raise ValueError(f"{where}: cameras[{index}] has unknown keys {sorted(unknown)}")
    info = entry.get("camera_info")
    return CameraTopics(str(entry["name"]), str(entry["image"]),
                        None if info is None else str(info))


TOP_KEYS = {"body_frame", "cameras", "calibration", "ground_truth", "odometry", "sync_slop_ms"}


def load_topic_map(path: Optional[str | Path] = None, cameras: Sequence[str] = (),
                   body_frame: Optional[str] = None, ground_truth: Optional[Any] = None,
                   odometry: Optional[Any] = None, calibration: Optional[str] = None,
                   sync_slop_ms: Optional[float] = None) -> TopicMap:
    """The map from the YAML file ``path`` (optional) with the arguments overriding it:
    ``cameras`` as ``NAME=TOPIC`` strings, ``ground_truth`` / ``odometry`` as in the file.
    ``calibration`` (a path, relative to the working directory) or the file's (relative to the
    file)."""
    data: Dict[str, Any] = {}
    where = "command line"
    base = Path.cwd()
    if path is not None:
        path = Path(path)
        where = str(path)
        if not path.is_file():
            raise ValueError(f"topic map {path} does not exist")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"topic map {path}: not valid YAML: {exc}") from None
        if not isinstance(data, Mapping):
            raise ValueError(f"topic map {path}: expected a mapping")
        unknown = set(data) - TOP_KEYS
        if unknown:
            raise ValueError(f"topic map {path}: unknown keys {sorted(unknown)}; known "
                             f"{sorted(TOP_KEYS)}")
        base = path.parent
    entries = list(cameras) if cameras else list(data.get("cameras") or [])
    cams = [_camera(e, i, where) for i, e in enumerate(entries)]
    calib_path = None
    if calibration:
        calib_path = Path(calibration)
    elif data.get("calibration"):
        calib_path = base / str(data["calibration"])
    rig = load_rig(calib_path, calibration=True) if calib_path is not None else None
    gt = ground_truth if ground_truth is not None else data.get("ground_truth")
    if gt is None:
        raise ValueError(f"{where}: no ground truth (ground_truth: {{odometry: TOPIC}} or "
                         f"{{tf: WORLD_FRAME}}; --ground-truth-odometry / --ground-truth-tf)")
    odo = odometry if odometry is not None else data.get("odometry", "ground_truth")
    slop = sync_slop_ms if sync_slop_ms is not None else data.get("sync_slop_ms", 0.0)
    try:
        slop_ns = int(round(float(slop) * 1e6))
    except (TypeError, ValueError):
        raise ValueError(f"{where}: sync_slop_ms must be a number, got {slop!r}") from None
    return TopicMap(cameras=cams, body_frame=str(body_frame or data.get("body_frame") or ""),
                    ground_truth=PoseSource.parse(gt, "ground_truth", False),
                    odometry=PoseSource.parse(odo, "odometry", True), sync_slop_ns=slop_ns,
                    calibration=rig, calibration_path=None if calib_path is None
                    else str(calib_path))
