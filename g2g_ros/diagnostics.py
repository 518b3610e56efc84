"""What a node reports about its health: recent problems (rate-limited logging), the
``diagnostic_msgs/DiagnosticStatus`` of ``/diagnostics``, and the project's Python ``logging``
records forwarded to the node's rclpy logger."""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from rclpy.node import Node


class ProblemLog:
    """Recent problems by key (e.g. ``camera cam2``), for status text and diagnostics.

    :meth:`report` also says whether the problem should be logged now: the first report of a
    key, then at most once every ``log_every_s`` per key (rate-limited logging).
    """

    def __init__(self, keep_s: float = 10.0, log_every_s: float = 5.0):
        self._lock = threading.Lock()
        self._items: Dict[str, Tuple[float, str]] = {}
        self.counts: Dict[str, int] = collections.Counter()
        self.keep_s = keep_s
        self.log_every_s = log_every_s
        self._logged: Dict[str, Tuple[float, int]] = {}  # key -> (time, count) when logged

    def report(self, key: str, message: str) -> Optional[int]:
        """Record a problem. Returns None when it should not be logged now, else how many
        reports of this key were not logged since its last logged one."""
        now = time.monotonic()
        with self._lock:
            self._items[key] = (now, message)
            self.counts[key] += 1
            last = self._logged.get(key)
            if last is not None and now - last[0] < self.log_every_s:
                return None
            self._logged[key] = (now, self.counts[key])
            return 0 if last is None else self.counts[key] - last[1] - 1

    def clear(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    def recent(self) -> List[Tuple[str, str]]:
        now = time.monotonic()
        with self._lock:
            return [(k, m) for k, (t, m) in sorted(self._items.items()) if now - t < self.keep_s]


class NodeLogBridge(logging.Handler):
    """Forwards the Python ``logging`` records of the project's modules (synchronizer, TF
    buffer, maps, model) to a node's rclpy logger, so that they carry time, severity and the
    node's name like the node's own lines (and reach ``/rosout``). One call site per severity:
    rclpy refuses a call site whose severity changes."""

    PACKAGES = ("g2g_ros", "g2g_model")

    def __init__(self, node: Node):
        super().__init__()
        self._logger = node.get_logger()
        self._formatter = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"{record.name}: {record.getMessage()}"
            if record.exc_info:
                text += "\n" + self._formatter.formatException(record.exc_info)
            if record.levelno >= logging.ERROR:
                self._logger.error(text)
            elif record.levelno >= logging.WARNING:
                self._logger.warning(text)
            elif record.levelno >= logging.INFO:
                self._logger.info(text)
            else:
                self._logger.debug(text)
        except Exception:  # logging must never raise into the code that logs
            self.handleError(record)

    def install(self) -> "NodeLogBridge":
        from rclpy.logging import LoggingSeverity

        debug = self._logger.get_effective_level() <= LoggingSeverity.DEBUG
        for name in self.PACKAGES:
            py_logger = logging.getLogger(name)
            py_logger.addHandler(self)
            py_logger.setLevel(logging.DEBUG if debug else logging.INFO)
            py_logger.propagate = False  # not printed a second time by Python's last resort
        return self

    def remove(self) -> None:
        for name in self.PACKAGES:
            py_logger = logging.getLogger(name)
            py_logger.removeHandler(self)
            if not py_logger.handlers:
                py_logger.propagate = True


def diagnostic_status(name: str, hardware_id: str, level: int, message: str,
                      values: Dict[str, Any]):
    from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

    if not isinstance(level, bytes):
        level = bytes([int(level)])
    return DiagnosticStatus(
        level=level, name=name, message=message, hardware_id=hardware_id,
        values=[KeyValue(key=str(k), value=str(v)) for k, v in values.items()],
    )


def tf_values(node) -> Dict[str, Any]:
    """The ``/diagnostics`` values of the node's TF buffer (``node.tf_buffer``, none without
    one): the bad ``/tf`` samples it refused, by reason (``loop 1, second_parent 3``), the
    newest of them (``base_link -> odom: loop``) and those it forgot (stored before the first
    ``/clock``, then found ahead of it)."""
    buffer = getattr(node, "tf_buffer", None)
    if buffer is None:
        return {}
    stats = buffer.stats()
    rejected = ", ".join(f"{reason} {n}" for reason, n in sorted(stats["rejected"].items()))
    return {"tf_rejected": rejected or "none",
            "tf_last_rejected": stats["last_rejected"] or "none",
            "tf_forgotten": stats["forgotten"]}


def publish_estimator_status(node, state: int, text: str, values: dict, cameras,
                             processed: int, dropped: int, diag_name: str,
                             hardware_id: str, warn_states=(), stale: bool = False) -> None:
    """Publish ``~/status`` (EstimatorStatus) and one ``/diagnostics`` entry of a
    :class:`~g2g_ros.managed_node.ManagedNode`.

    ``text`` gets the recent problems appended, ``values`` (the node's own key/values,
    state first) the stage latencies, the problems and the TF buffer's
    (:func:`tf_values`). The level is OK for STATE_OK, WARN
    for STATE_DEGRADED and ``warn_states``, ERROR otherwise, then the node's
    ``lifecycle_level``; ``stale`` (an active node whose inputs went quiet) makes it STALE.
    Uses the node's ``status_pub``, ``diag_pub`` and ``stages``.
    """
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    from g2g_msgs.msg import EstimatorStatus

    problems = node.problems.recent()
    if problems:
        text += ": " + "; ".join(f"{k}: {m}" for k, m in problems)
    now = node.get_clock().now().to_msg()
    stages = node.stages.snapshot()
    status = EstimatorStatus(state=state, message=text, cameras_used=list(cameras),
                             groups_processed=processed, groups_dropped=dropped,
                             stage_names=list(stages),
                             stage_latency_ms=[float(v) for v in stages.values()])
    status.header.stamp = now
    node.status_pub.publish(status)
    values = dict(values)
    for name, ms in stages.items():
        values[f"latency {name}_ms"] = f"{ms:.1f}"
    for key, msg in problems:
        values[f"problem {key}"] = msg
    values.update(tf_values(node))
    warn = (EstimatorStatus.STATE_DEGRADED, *warn_states)
    level = (DiagnosticStatus.OK if state == EstimatorStatus.STATE_OK
             else DiagnosticStatus.WARN if state in warn else DiagnosticStatus.ERROR)
    if stale and node.active:
        level = DiagnosticStatus.STALE
    arr = DiagnosticArray()
    arr.header.stamp = now
    arr.status = [diagnostic_status(f"{node.get_name()}: {diag_name}", hardware_id,
                                    node.lifecycle_level(level), text, values)]
    node.diag_pub.publish(arr)
