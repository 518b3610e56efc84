"""Whether a bag carries every camera the nodes of a replay are set to use.

A node subscribes ``<cam>/<image_topic>[/compressed]`` and ``<cam>/<camera_info_topic>`` for
every camera of its ``cameras`` parameter (relocalize also for its ``reloc_camera``). When the
bag lacks one of them, an evaluation replay cannot work: rig odometry never completes a rig
group and every image group waits out the replay's wait timeout. So both evaluation replays
check first and stop with :class:`RigMismatch` naming the missing cameras:

* ``g2g-eval-bag`` before it starts the nodes, from the parameters the nodes will get (rig
  preset, the evaluation's own file, the user's overrides: :func:`check_rig`);
* ``g2g-bag play --eval``, whose nodes run already, from their live parameters
  (``<node>/get_parameters``, :func:`live_parameters`) as soon as each node shows up on a
  wait topic.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from g2g_ros.bags.bag_reader import BagError, open_bag, read_metadata, require_topics

# The parameters that say which topics a node subscribes (those a node does not declare are
# simply absent from its answer).
CAMERA_PARAMETERS = ("cameras", "reloc_camera", "image_topic", "camera_info_topic",
                     "use_compressed")
DEFAULT_IMAGE_TOPIC, DEFAULT_INFO_TOPIC = "image_raw", "camera_info"


class RigMismatch(BagError):
    """The nodes are set to use cameras the bag does not have (the message names them)."""


def bag_cameras(bag) -> Tuple[List[str], bool, List[str]]:
    """``(cameras, compressed, topics)`` of a bag: its cameras (metadata, else the
    ``<cam>/camera_info`` topics; each with an image topic), whether the images are
    compressed, and all its topics."""
    with open_bag(bag) as reader:
        meta = read_metadata(reader, str(bag))
        topics = sorted(reader.topics)
        cams = list(meta.get("cameras") or sorted(
            t.split("/")[0] for t in topics if t.endswith("/camera_info")))
        if not cams:
            raise BagError(f"bag {bag} has no <cam>/camera_info topics: nothing to evaluate")
        require_topics(reader, [f"{c}/camera_info" for c in cams], str(bag),
                       "by the nodes (camera_info per camera)")
    images = [c for c in cams if f"{c}/image_raw" in topics
              or f"{c}/image_raw/compressed" in topics]
    if len(images) != len(cams):
        raise BagError(f"bag {bag} lacks image topics for cameras "
                       f"{sorted(set(cams) - set(images))}")
    return cams, any(t.endswith("/compressed") for t in topics), topics


def node_cameras(params: Mapping[str, object]) -> List[str]:
    """The cameras a node with these parameters subscribes: ``cameras``, then relocalize's
    ``reloc_camera`` when it is not among them."""
    cams = [str(c) for c in (params.get("cameras") or []) if c]
    reloc = params.get("reloc_camera")
    if reloc and reloc not in cams:
        cams.append(str(reloc))
    return cams


def camera_topics(cam: str, params: Mapping[str, object]) -> Tuple[str, str]:
    """``(image topic, camera_info topic)`` a node with these parameters subscribes for
    ``cam`` (relative names, as in a bag)."""
    image = f"{cam}/{params.get('image_topic') or DEFAULT_IMAGE_TOPIC}"
    if params.get("use_compressed"):
        image += "/compressed"
    return image, f"{cam}/{params.get('camera_info_topic') or DEFAULT_INFO_TOPIC}"


def missing_cameras(nodes: Mapping[str, Mapping[str, object]],
                    bag_topics: Iterable[str]) -> Dict[str, Dict[str, List[str]]]:
    """Per node, the cameras it would subscribe whose topics the bag lacks:
    ``{node: {camera: [missing topics]}}`` (nodes without a missing camera left out)."""
    have = {t.lstrip("/") for t in bag_topics}
    out: Dict[str, Dict[str, List[str]]] = {}
    for node, params in nodes.items():
        for cam in node_cameras(params):
            lacking = [t for t in camera_topics(cam, params) if t not in have]
            if lacking:
                out.setdefault(node, {})[cam] = lacking
    return out


def mismatch_message(missing: Mapping[str, Mapping[str, List[str]]],
                     nodes: Mapping[str, Mapping[str, object]], bag,
                     bag_cams: Sequence[str], fix: str) -> str:
    lines = [f"bag {bag} lacks cameras that the nodes are set to use (its cameras: "
             f"{list(bag_cams)}):"]
    for node, cams in missing.items():
        topics = sorted(t for ts in cams.values() for t in ts)
        lines.append(f"  {node}: cameras {node_cameras(nodes[node])}; missing "
                     f"{sorted(cams)} (no topics {topics})")
    lines.append(fix)
    return "\n".join(lines)


def check_rig(nodes: Mapping[str, Mapping[str, object]], bag, bag_topics: Iterable[str],
              bag_cams: Sequence[str], fix: str = "") -> None:
    """Raise :class:`RigMismatch` naming, per node, the cameras the bag lacks.

    ``nodes``: node name -> the parameters it runs with; ``fix``: a last line saying how to
    make them agree."""
    missing = missing_cameras(nodes, bag_topics)
    if missing:
        raise RigMismatch(mismatch_message(missing, nodes, bag, bag_cams, fix))


#: Seconds after which :func:`live_parameters` sends an unanswered request again.
RESEND_S = 1.0


def live_parameters(node, spin: Callable[[float], None], fqn: str,
                    names: Sequence[str] = CAMERA_PARAMETERS,
                    timeout_s: float = 5.0) -> Optional[Dict[str, object]]:
    """The values of ``names`` that the running node ``fqn`` has (the standard
    ``<fqn>/get_parameters`` service; undeclared ones left out), or None when it does not
    answer within ``timeout_s``. ``node`` makes the call; ``spin(timeout)`` runs it."""
    from rcl_interfaces.msg import ParameterType
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python

    client = node.create_client(GetParameters, f"{fqn}/get_parameters")
    try:
        deadline = time.monotonic() + timeout_s
        while not client.service_is_ready():
            if time.monotonic() > deadline:
                return None
            spin(0.05)
        # One name per request: rclpy answers nothing at all when one name is undeclared.
        # A request unanswered after RESEND_S is sent again (it reads only): right after
        # discovery the server may not know our response reader yet, and Fast DDS then drops
        # the response (ros2/rmw_fastrtps#467).
        futures: Dict[str, object] = {}
        while True:
            for name in names:
                if name not in futures or not futures[name].done():
                    futures[name] = client.call_async(GetParameters.Request(names=[name]))
            resend = time.monotonic() + RESEND_S
            while not all(f.done() for f in futures.values()) and time.monotonic() < resend:
                if time.monotonic() > deadline:
                    return None
                spin(0.05)
            if all(f.done() for f in futures.values()):
                break
        values = {name: f.result().values for name, f in futures.items()}
        return {name: parameter_value_to_python(v[0]) for name, v in values.items()
                if v and v[0].type != ParameterType.PARAMETER_NOT_SET}
    finally:
        node.destroy_client(client)
