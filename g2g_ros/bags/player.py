"""Replay of a bag on live topics with ``/clock`` (``g2g-bag play``).

Messages are published as stored (raw CDR, no re-encoding) in log-time order, grouped by stamp:
all messages sharing a log time form one *group*, published right after ``/clock`` is set to
that time, so ``use_sim_time`` nodes see the recorded stamps. Latched topics (``/tf_static``,
metadata: offered transient local in the bag) are published with transient-local QoS.

Pacing:

* normal mode: groups follow the recorded time scaled by ``rate`` (2.0 = twice as fast);
* evaluation mode (one or more :class:`WaitSpec`): after every group that contains images the
  player waits until every node concerned has processed it -- a message on its wait topic
  stamped at or after the group (e.g. ``odometry`` of rig_odometry, ``relocalize/processed``
  of relocalize; a ``std_msgs/Header`` counts by its own stamp), or, for
  ``g2g_msgs/EstimatorStatus``, an increase of ``groups_processed`` -- or until ``timeout_s``
  passes (counted per wait topic in :class:`PlayStats`, logged as a warning). A spec with
  ``image_topics`` only concerns groups with an image on one of them (relocalize listens to
  one camera). Results then do not depend on the machine's speed. Before the first group it
  waits for the nodes to come up (a publisher on every wait topic and subscribers on the image
  topics concerned); each node that comes up on a wait topic is asked for its camera
  parameters, and a node set to use cameras the bag lacks stops the replay
  (:class:`~g2g_ros.bags.rig_check.RigMismatch`, naming them).
"""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from g2g_ros.bags.bag_reader import BagError, iter_messages, open_bag
from g2g_ros.bags.typestore import TF_STATIC_TOPIC, TF_TOPIC, is_latched
from g2g_ros.conversions import stamp_ns, to_stamp

LOG = logging.getLogger(__name__)
IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")


def message_class(msgtype: str):
    """``"pkg/msg/Name"`` -> the rclpy message class (ValueError naming the type if absent)."""
    try:
        pkg, kind, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{pkg}.{kind}"), name)
    except (ValueError, ImportError, AttributeError) as exc:
        raise ValueError(f"message type {msgtype!r} is not available to rclpy: {exc}") from exc


@dataclass
class WaitSpec:
    """Evaluation-mode pacing: what signals that the nodes finished a group."""

    topic: str = "odometry"
    msgtype: str = "nav_msgs/msg/Odometry"
    timeout_s: float = 30.0
    startup_timeout_s: float = 120.0
    image_topics: Tuple[str, ...] = ()     # empty: every image topic of the bag

    def validate(self) -> None:
        if self.timeout_s <= 0 or self.startup_timeout_s <= 0:
            raise ValueError(f"wait timeouts must be > 0, got timeout_s={self.timeout_s}, "
                             f"startup_timeout_s={self.startup_timeout_s}")

    def concerns(self, image_topics: Set[str]) -> bool:
        """Whether a group with images on ``image_topics`` waits for this spec."""
        return bool(image_topics) and (not self.image_topics
                                       or bool(image_topics & set(self.image_topics)))


@dataclass
class PlayStats:
    groups: int = 0
    messages: int = 0
    waited_groups: int = 0
    wait_timeouts: int = 0
    timeouts_by_topic: Dict[str, int] = field(default_factory=dict)
    latencies_s: List[float] = field(default_factory=list)   # eval mode: group -> wait signal
    first_stamp_ns: int = 0
    last_stamp_ns: int = 0
    unacked: bool = False   # a subscriber had not acknowledged everything when play ended


class _Progress:
    """What the wait topic has said so far (stamps seen, groups_processed)."""

    def __init__(self):
        self.latest_stamp = -1
        self.processed = -1
        self.count = 0

    def on_msg(self, msg) -> None:
        self.count += 1
        if hasattr(msg, "groups_processed"):
            self.processed = max(self.processed, int(msg.groups_processed))
        elif hasattr(msg, "header"):
            self.latest_stamp = max(self.latest_stamp, stamp_ns(msg.header.stamp))
        elif hasattr(msg, "stamp") and hasattr(msg, "frame_id"):   # a std_msgs/Header
            self.latest_stamp = max(self.latest_stamp, stamp_ns(msg.stamp))

    def done(self, stamp: int, processed_before: int) -> bool:
        return self.latest_stamp >= stamp or self.processed > max(processed_before, 0)


class BagPlayer(Node):
    """Publishes one bag (see the module docstring). Drive it with :meth:`play`."""

    FIRST_ANSWER_S = 8.0
    FIRST_RETRIES = 3

    def __init__(self, bag: str | Path, rate: float = 1.0,
                 wait: Optional[WaitSpec | Sequence[WaitSpec]] = None,
                 clock: bool = True, exclude_tf_children: Sequence[str] = (),
                 topics: Optional[Sequence[str]] = None, **node_kwargs):
        super().__init__("g2g_bag_player", **node_kwargs)
        from rosgraph_msgs.msg import Clock

        if not rate > 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.waits: List[WaitSpec] = [] if wait is None else (
            [wait] if isinstance(wait, WaitSpec) else list(wait))
        topics_waited = [w.topic for w in self.waits]
        if len(set(topics_waited)) != len(topics_waited):
            raise ValueError(f"wait topics must be distinct, got {topics_waited}")
        for w in self.waits:
            w.validate()
        self.bag = str(bag)
        self.rate = rate
        self.exclude_tf_children: Set[str] = set(exclude_tf_children)
        self.reader = open_bag(bag)
        conns = [c for c in self.reader.connections if topics is None or c.topic in topics]
        if not conns:
            raise BagError(f"bag {bag}: nothing to play (topics {topics}, bag has "
                           f"{sorted(self.reader.topics)})")
        self.topics = sorted({c.topic for c in conns})
        self.types: Dict[str, str] = {c.topic: c.msgtype for c in conns}
        self.latched = {c.topic for c in conns if c.topic == TF_STATIC_TOPIC
                        or is_latched(c.ext.offered_qos_profiles)}
        self.pubs = {}
        for topic in self.topics:
            qos = QoSProfile(depth=1 if topic in self.latched else 10,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL
                             if topic in self.latched else DurabilityPolicy.VOLATILE)
            self.pubs[topic] = self.create_publisher(message_class(self.types[topic]), topic,
                                                     qos)
        self.clock_pub = self.create_publisher(Clock, "/clock", 10) if clock else None
        self.progress: Dict[str, _Progress] = {}
        for w in self.waits:
            self.progress[w.topic] = _Progress()
            self.create_subscription(message_class(w.msgtype), w.topic,
                                     self.progress[w.topic].on_msg, 50)
        self.stats = PlayStats()
        self.current_stamp_ns = 0
        self.checked_nodes: Set[str] = set()   # nodes whose cameras were checked (eval mode)

    # ------------------------------------------------------------------ publishing
    def _groups(self):
        """``(stamp, [(topic, msgtype, raw)])`` in log-time order."""
        group: List[Tuple[str, str, bytes]] = []
        stamp = None
        for topic, msgtype, t, raw in iter_messages(self.reader, self.topics, self.bag):
            if stamp is not None and t != stamp:
                yield stamp, group
                group = []
            stamp = t
            group.append((topic, msgtype, raw))
        if group:
            yield stamp, group

    def _filter_tf(self, raw: bytes) -> Optional[bytes]:
        from rclpy.serialization import deserialize_message, serialize_message
        from tf2_msgs.msg import TFMessage

        msg = deserialize_message(raw, TFMessage)
        kept = [t for t in msg.transforms if t.child_frame_id not in self.exclude_tf_children]
        if len(kept) == len(msg.transforms):
            return raw
        return serialize_message(TFMessage(transforms=kept)) if kept else None

    def publish_clock(self, stamp: int) -> None:
        from rosgraph_msgs.msg import Clock

        self.current_stamp_ns = int(stamp)
        if self.clock_pub is not None:
            self.clock_pub.publish(Clock(clock=to_stamp(int(stamp))))

    def _publish_group(self, stamp: int, group, skip: Set[str] = frozenset()) -> None:
        self.publish_clock(stamp)
        for topic, _, raw in group:
            if topic in skip:
                continue
            if topic == TF_TOPIC and self.exclude_tf_children:
                raw = self._filter_tf(raw)
                if raw is None:
                    continue
            self.pubs[topic].publish(raw)
            self.stats.messages += 1

    # ------------------------------------------------------------------ pacing
    SUBSCRIBER_WAIT_S = 10.0

    DRAIN_SPINS = 20

    def _concerned(self, group) -> List[WaitSpec]:
        images = {t for t, m, _ in group if m in IMAGE_TYPES}
        return [w for w in self.waits if w.concerns(images)]

    def _wait_for_nodes(self, spin: Callable[[float], None]) -> None:
        all_images = {t for t, m in self.types.items() if m in IMAGE_TYPES}
        image_topics = sorted(set().union(*[
            (set(w.image_topics) & all_images) if w.image_topics else all_images
            for w in self.waits]))
        timeout = max(w.startup_timeout_s for w in self.waits)
        deadline = time.monotonic() + timeout
        ready_since = 0.0
        while time.monotonic() < deadline:
            spin(0.05)
            ready = all(self.count_publishers(w.topic) > 0 for w in self.waits) and all(
                self.pubs[t].get_subscription_count() > 0 for t in image_topics)
            # Every node seen so far, the ready ones included (once their names are known).
            named = self._check_nodes_rig(spin)
            if ready:
                ready_since = ready_since or time.monotonic()
                if named or time.monotonic() > ready_since + self.NODE_NAME_WAIT_S:
                    return
        raise TimeoutError(f"evaluation replay: the nodes did not come up within "
                           f"{timeout:.0f} s (publishers on {[w.topic for w in self.waits]} "
                           f"and subscribers on {image_topics})")

    # How long a ready node's name may stay unknown to discovery before going on unchecked.
    NODE_NAME_WAIT_S = 5.0

    def _check_nodes_rig(self, spin: Callable[[float], None]) -> bool:
        """Each node that has come up on a wait topic, once: are the cameras it is set to use
        (its live parameters) in the bag? :class:`~g2g_ros.bags.rig_check.RigMismatch`
        naming those missing; a node that does not answer is left unchecked (logged).
        Whether every publisher on the wait topics had a known node name."""
        from g2g_ros.bags.rig_check import check_rig, live_parameters
        from g2g_ros.launch_graphs import node_fqn

        named = True
        for w in self.waits:
            for info in self.get_publishers_info_by_topic(w.topic):
                fqn = node_fqn(info.node_namespace, info.node_name)
                # Discovery may know the endpoint before its node's name: ask again later.
                if "_NODE_NAME_UNKNOWN_" in fqn:
                    named = False
                if fqn in self.checked_nodes or "_NODE_NAME_UNKNOWN_" in fqn:
                    continue
                self.checked_nodes.add(fqn)
                params = live_parameters(self, spin, fqn)
                if params is None:
                    LOG.warning("%s did not answer get_parameters: its cameras are not checked "
                                "against the bag", fqn)
                    continue
                bag_cams = sorted(t.split("/")[0] for t in self.topics
                                  if t.endswith("/camera_info"))
                check_rig({fqn: params}, self.bag, self.topics, bag_cams,
                          f"Start the node with the bag's cameras (-p cameras:=["
                          f"{','.join(bag_cams)}]), or play a bag that has them.")
        return named

    def _wait_group(self, stamp: int, before: Dict[str, int], specs: List[WaitSpec],
                    spin: Callable[[float], None], timeout_s: float) -> List[WaitSpec]:
        """Spin until every spec saw the group (or ``timeout_s``); the specs still missing."""
        deadline = time.monotonic() + timeout_s
        missing = list(specs)
        while missing and time.monotonic() < deadline:
            spin(0.005)
            missing = [w for w in missing
                       if not self.progress[w.topic].done(stamp, before[w.topic])]
        return missing

    def _publish_and_wait(self, stamp: int, group, skip: Set[str],
                          spin: Callable[[float], None]) -> None:
        """Eval mode. Until every node has answered once, a group without an answer within
        ``FIRST_ANSWER_S`` is sent again (DDS may drop what is sent before both sides have
        matched; the nodes have not used any of it then), up to ``FIRST_RETRIES`` times.
        The group's images are sent last. Afterwards what is already delivered is drained
        (``DRAIN_SPINS`` zero-timeout spins), so that outputs the nodes sent before their
        answer are handled at this group's clock."""
        specs = self._concerned(group)
        # Images last: what a node needs for an image (camera_info, TF) is sent before it.
        group = sorted(group, key=lambda item: item[1] in IMAGE_TYPES)
        t0 = time.monotonic()
        retries = self.FIRST_RETRIES if any(self.progress[w.topic].count == 0
                                            for w in specs) else 0
        missing = specs
        for attempt in range(retries + 1):
            before = {w.topic: self.progress[w.topic].processed for w in specs}
            if attempt:
                LOG.info("no answer on %s yet; sending the group at %d ns again",
                         [w.topic for w in missing], stamp)
            self._publish_group(stamp, group, skip)
            last = attempt == retries
            timeout = max(w.timeout_s for w in missing)
            missing = self._wait_group(stamp, before, missing, spin,
                                       timeout if last else min(self.FIRST_ANSWER_S, timeout))
            if not missing:
                break
        for _ in range(self.DRAIN_SPINS):
            spin(0.0)
        if not missing:
            self.stats.latencies_s.append(time.monotonic() - t0)
            self.stats.waited_groups += 1
            return
        for w in missing:
            self.stats.wait_timeouts += 1
            self.stats.timeouts_by_topic[w.topic] = self.stats.timeouts_by_topic.get(
                w.topic, 0) + 1
            LOG.warning("no sign on %s that the group at %d ns was processed within %.1f s; "
                        "going on", w.topic, stamp, w.timeout_s)

    def play(self, spin: Callable[[float], None], progress: bool = False,
             delay_s: float = 0.0) -> PlayStats:
        """Publish the whole bag; ``spin(timeout_s)`` runs the executor(s) while waiting.

        ``delay_s``: wall time to wait first (lets subscribers discover the publishers).
        """
        from tqdm import tqdm

        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        end = time.monotonic() + delay_s
        while time.monotonic() < end:
            spin(0.05)
        if not self.waits:
            # Plain replay: messages sent before discovery matched a subscriber are lost, so wait
            # (bounded) until some image topic has one -- replays then do not depend on load.
            image_topics = [t for t, m in self.types.items() if m in IMAGE_TYPES]
            end = time.monotonic() + self.SUBSCRIBER_WAIT_S
            while time.monotonic() < end and not any(
                    self.pubs[t].get_subscription_count() > 0 for t in image_topics):
                spin(0.05)
        groups = list(self._groups())
        if not groups:
            raise BagError(f"bag {self.bag}: no messages")
        first = groups[0][0]
        self.stats.first_stamp_ns = first
        skip: Set[str] = set()
        if self.waits:
            # Latched topics (rig extrinsics) first, so the nodes know the rig before images.
            self.publish_clock(first)
            for stamp, group in groups:
                for topic, _, raw in group:
                    if topic in self.latched and topic not in skip:
                        self.pubs[topic].publish(raw)
                        skip.add(topic)
            self._wait_for_nodes(spin)
            # Again, now that the nodes are matched: a node without a ROS time drops images.
            self.publish_clock(first)
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                spin(0.05)
        wall0 = time.monotonic()
        bar = tqdm(groups, desc="play", unit="group", disable=not progress)
        for stamp, group in bar:
            if not self.waits:
                target = wall0 + (stamp - first) * 1e-9 / self.rate
                while time.monotonic() < target:
                    spin(min(0.05, max(0.0, target - time.monotonic())))
            if self._concerned(group):
                self._publish_and_wait(stamp, group, skip, spin)
            else:
                self._publish_group(stamp, group, skip)
                spin(0.0)
            self.stats.groups += 1
            self.stats.last_stamp_ns = stamp
        bar.close()
        self._wait_for_acks(spin)
        return self.stats

    ACK_WAIT_S = 10.0

    def _wait_for_acks(self, spin: Callable[[float], None]) -> None:
        """Until every subscriber has acknowledged every message (at most ``ACK_WAIT_S``;
        :func:`g2g_ros.spinning.wait_for_all_acked`)."""
        from g2g_ros.spinning import wait_for_all_acked

        if not wait_for_all_acked(self.pubs.values(), spin, self.ACK_WAIT_S):
            self.stats.unacked = True
            LOG.warning("not every subscriber acknowledged the last messages within %.0f s",
                        self.ACK_WAIT_S)

    def destroy_node(self):
        try:
            self.reader.close()
        except Exception:  # already closed
            pass
        return super().destroy_node()
