"""ManagedNode's registry of owned resources: what configure() creates is
destroyed by the base at cleanup, what activate() creates at deactivate, newest first, and a
destroy that fails does not keep the others alive."""

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.lifecycle import TransitionCallbackReturn as R  # noqa: E402

from g2g_ros.managed_node import ManagedNode  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(60)]


class Fake:
    """A resource with its own destroy(), recording the order of destruction."""

    def __init__(self, name, log, fail=False):
        self.name, self.log, self.fail = name, log, fail

    def destroy(self):
        self.log.append(self.name)
        if self.fail:
            raise RuntimeError(f"{self.name} would not go")


class Probe(ManagedNode):
    def __init__(self, fail_in=(), fail_activate=False, **kwargs):
        super().__init__("owned_resources_probe", **kwargs)
        self.log, self.fail_in, self.fail_activate = [], set(fail_in), fail_activate
        self.hooks = []
        self.start_lifecycle()

    def configure(self):
        from std_msgs.msg import Header
        from std_srvs.srv import Trigger

        self.pub = self.owned(self.create_lifecycle_publisher(Header, "~/out", 10))
        self.srv = self.owned(self.create_service(Trigger, "~/poke", lambda req, res: res))
        for name in ("c1", "c2", "c3"):
            self.owned(Fake(name, self.log, name in self.fail_in))

    def activate(self):
        from std_msgs.msg import Header

        self.sub = self.owned(self.create_subscription(Header, "~/in", lambda msg: None, 10))
        self.timer = self.owned(self.create_timer(10.0, lambda: None))
        for name in ("a1", "a2"):
            self.owned(Fake(name, self.log, name in self.fail_in))
        self.kept = self.owned(Fake("kept", self.log), until="cleanup")
        if self.fail_activate:
            raise ValueError("no inputs")

    def deactivate(self):
        self.hooks.append(("deactivate", list(self.log)))

    def cleanup(self):
        self.hooks.append(("cleanup", list(self.log)))


def _has(entities, entity):
    return any(e is entity for e in entities)


def test_activate_resources_go_at_deactivate_configure_resources_at_cleanup(context):
    node = Probe(context=context)
    try:
        assert node.lifecycle_state == "active"
        assert _has(node.subscriptions, node.sub) and _has(node.timers, node.timer)
        assert node.trigger_deactivate() == R.SUCCESS
        assert not _has(node.subscriptions, node.sub) and not _has(node.timers, node.timer)
        assert node.log == ["a2", "a1"], "newest first, only what activate() owned"
        assert node.hooks == [("deactivate", ["a2", "a1"])], "the hook runs after the release"
        assert _has(node.publishers, node.pub) and _has(node.services, node.srv)
        assert node.trigger_cleanup() == R.SUCCESS
        assert not _has(node.publishers, node.pub) and not _has(node.services, node.srv)
        assert node.pub not in node._managed_entities
        assert node.log == ["a2", "a1", "kept", "c3", "c2", "c1"]
        assert node.resources.held("cleanup") == [] == node.resources.held("deactivate")
        # Configured again: the same resources again, released again at shutdown.
        assert node.trigger_configure() == R.SUCCESS and node.trigger_activate() == R.SUCCESS
        node.log.clear()
        assert node.trigger_shutdown() == R.SUCCESS
        assert node.log == ["a2", "a1", "kept", "c3", "c2", "c1"]
        assert not _has(node.publishers, node.pub) and not _has(node.subscriptions, node.sub)
    finally:
        node.destroy_node()


def test_a_failing_destroy_does_not_keep_the_others(context):
    node = Probe(fail_in=("c2", "a2"), context=context)
    try:
        assert node.trigger_deactivate() == R.SUCCESS
        assert node.log == ["a2", "a1"] and not _has(node.subscriptions, node.sub)
        assert not _has(node.timers, node.timer)
        assert node.trigger_cleanup() == R.SUCCESS
        assert node.log == ["a2", "a1", "kept", "c3", "c2", "c1"]
        assert not _has(node.services, node.srv) and not _has(node.publishers, node.pub)
        assert node.lifecycle_state == "unconfigured"
    finally:
        node.destroy_node()


def test_a_failed_activate_releases_what_it_made(context):
    node = Probe(fail_activate=True, context=context)
    try:
        assert node.lifecycle_state == "inactive" and "no inputs" in node.last_failure
        assert node.log == ["a2", "a1"] and not _has(node.subscriptions, node.sub)
        assert node.resources.held("deactivate") == []
        assert [r.name for r in node.resources.held("cleanup")[-1:]] == ["kept"]
        assert node.trigger_cleanup() == R.SUCCESS
        assert node.log == ["a2", "a1", "kept", "c3", "c2", "c1"]
    finally:
        node.destroy_node()


def test_owned_refuses_an_unknown_transition_and_an_undestroyable_resource(context):
    node = Probe(context=context)
    try:
        with pytest.raises(ValueError, match="until must be one of"):
            node.owned(Fake("x", []), until="shutdown")
        with pytest.raises(TypeError, match="do not know how to destroy"):
            node.owned(object())
        done = []
        node.owned(object(), destroy=lambda: done.append(1))
        assert node.trigger_deactivate() == R.SUCCESS and node.trigger_cleanup() == R.SUCCESS
        assert done == [1]
    finally:
        node.destroy_node()
