"""Message types and QoS of the topics in G2G bags.

Bags are written by ``rosbags`` (no ROS install needed to read them) with the type definitions
of ROS 2 Kilted plus the ``g2g_msgs`` messages, so every connection carries its message
definition and RIHS01 hash and the bag plays with ``ros2 bag play`` on a full install too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from rosbags.interfaces import (
    Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime,
)
from rosbags.typesys import Stores, get_typestore, get_types_from_msg

# Topic names shared by the converter, the player and the evaluation.
TF_TOPIC = "/tf"
TF_STATIC_TOPIC = "/tf_static"
GT_ODOM_TOPIC = "ground_truth/odometry"
METADATA_TOPIC = "/g2g/metadata"
GT_WORLD_FRAME = "gt_world"
GT_BASE_FRAME = "gt_base_link"

MSGS_DIR = Path(__file__).resolve().parents[2] / "g2g_msgs" / "msg"

_ZERO = QosTime(0, 0)


def bag_typestore(msgs_dir: Optional[Path] = None):
    """Kilted typestore with the ``g2g_msgs`` messages registered from their ``.msg`` files.

    Falls back to the installed ``g2g_msgs`` share directory when the source tree is absent.
    """
    folder = Path(msgs_dir) if msgs_dir is not None else MSGS_DIR
    if not folder.is_dir():
        from ament_index_python.packages import get_package_share_directory

        folder = Path(get_package_share_directory("g2g_msgs")) / "msg"
    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for path in sorted(folder.glob("*.msg")):
        types.update(get_types_from_msg(path.read_text(), f"g2g_msgs/msg/{path.stem}"))
    store.register(types)
    return store


def bag_qos(latched: bool = False, depth: int = 10) -> Qos:
    """The offered QoS stored with a connection: reliable, keep-last; ``latched`` = transient
    local (``/tf_static``, metadata), so ``ros2 bag play`` re-offers them to late joiners."""
    return Qos(QosHistory.KEEP_LAST, 1 if latched else depth, QosReliability.RELIABLE,
               QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
               _ZERO, _ZERO, QosLiveliness.AUTOMATIC, _ZERO, False)


def is_latched(qos_profiles) -> bool:
    """Whether any offered QoS of a connection is transient local."""
    return any(getattr(q, "durability", None) == QosDurability.TRANSIENT_LOCAL
               for q in qos_profiles or ())
