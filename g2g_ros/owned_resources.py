"""What a managed node's ``configure()`` / ``activate()`` created, released by the node base.

:class:`g2g_ros.managed_node.ManagedNode` records every resource a node hands to
:meth:`~g2g_ros.managed_node.ManagedNode.owned` here, with the transition that ends it:
``"deactivate"`` (made by ``activate()``: subscriptions, timers, camera inputs) or ``"cleanup"``
(made by ``configure()``: lifecycle publishers, services, TF listener / broadcaster, worker). The
base destroys them itself on that transition, on a failed configure / activate and at shutdown:
newest first, each destroy guarded, so one that fails is logged and the others are still
released.

How a resource is destroyed: an explicit ``destroy`` callable, else by its kind (lifecycle
publisher, publisher, subscription, service, client, timer through the node's ``destroy_*``),
else its own ``destroy()`` method (:class:`~g2g_ros.camera_inputs.CameraInputs`,
:class:`~g2g_ros.tf_listener.TransformListener`,
:class:`~g2g_ros.tf_broadcaster.TransformBroadcaster`).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

UNTIL = ("deactivate", "cleanup")


def destroyer(node, resource: Any) -> Callable[[], Any]:
    """How ``resource`` of ``node`` is destroyed (``TypeError`` when it cannot be)."""
    from rclpy.client import Client
    from rclpy.lifecycle.publisher import LifecyclePublisher
    from rclpy.publisher import Publisher
    from rclpy.service import Service
    from rclpy.subscription import Subscription
    from rclpy.timer import Timer

    for kind, destroy in ((LifecyclePublisher, node.destroy_lifecycle_publisher),
                          (Publisher, node.destroy_publisher),
                          (Subscription, node.destroy_subscription),
                          (Service, node.destroy_service), (Client, node.destroy_client),
                          (Timer, node.destroy_timer)):
        if isinstance(resource, kind):
            return lambda: destroy(resource)
    if callable(getattr(resource, "destroy", None)):
        return resource.destroy
    raise TypeError(f"do not know how to destroy {resource!r}: pass destroy=")


class OwnedResources:
    """The resources of one node, by the transition that releases them."""

    def __init__(self, node, log_error: Callable[[str], None]):
        self._node = node
        self._log_error = log_error
        self._owned: Dict[str, List[Tuple[Any, Callable[[], Any]]]] = {u: [] for u in UNTIL}

    def add(self, resource: Any, until: str, destroy: Optional[Callable[[], Any]] = None) -> Any:
        if until not in UNTIL:
            raise ValueError(f"until must be one of {UNTIL}, got {until!r}")
        self._owned[until].append((resource, destroy or destroyer(self._node, resource)))
        return resource

    def held(self, until: str) -> List[Any]:
        """The resources released at ``until``, oldest first."""
        return [r for r, _ in self._owned[until]]

    def release(self, until: str) -> int:
        """Destroy what ``until`` ends, newest first; returns how many destroys failed."""
        failed = 0
        owned, self._owned[until] = self._owned[until], []
        for resource, destroy in reversed(owned):
            try:
                destroy()
            except Exception as exc:  # the others must still be released
                failed += 1
                self._log_error(f"releasing {type(resource).__name__} at {until} failed: "
                                f"{exc!r}")
        return failed
