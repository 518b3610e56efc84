"""Peer process for test_foundation_dds: serves g2g_msgs/srv/LoadMap on ``test_server/load_map``.

The reply is a pure function of the request so the client can check the round trip: success
iff the path ends with ``.g2gmap``, num_keyframes = len(path), message echoes the path.
"""

import argparse
import time

import rclpy

from g2g_msgs.srv import LoadMap


def handle(request: LoadMap.Request, response: LoadMap.Response) -> LoadMap.Response:
    response.success = request.path.endswith(".g2gmap")
    response.num_keyframes = len(request.path)
    response.message = f"server saw {request.path}"
    return response


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node("test_server")
    node.create_service(LoadMap, "~/load_map", handle)
    deadline = time.monotonic() + args.seconds
    try:
        while time.monotonic() < deadline and rclpy.ok():
            rclpy.spin_once(node, timeout_sec=0.1)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
