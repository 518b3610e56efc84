"""Pieces shared by the G2G nodes: parameters, worker thread, stage timing, status/diagnostics.

Threading model (ARCHITECTURE §5): subscription callbacks only enqueue into bounded queues;
inference runs on a :class:`Worker` thread; publishing from the worker is thread-safe in rclpy.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

LOG = logging.getLogger(__name__)


# Timers for status, diagnostics and TF re-sending run on the steady clock: with use_sim_time a
# ROS-time timer stops whenever /clock stops, and a node must keep reporting its health then.

def steady_timer(node: Node, period_s: float, fn: Callable[[], None], what: str):
    """A steady-clock timer whose callback can never take the node down (errors are logged)."""
    return node.create_timer(period_s, guarded(node, what, fn),
                             clock=Clock(clock_type=ClockType.STEADY_TIME))


def declare(node: Node, name: str, default: Any, description: str,
            read_only: bool = False) -> Any:
    """Declare a parameter with a description and default; return its value."""
    desc = ParameterDescriptor(description=description, read_only=read_only)
    return node.declare_parameter(name, default, desc).value


def sensor_qos(reliability: str, depth: int = 5) -> QoSProfile:
    """QoS for camera streams: best effort by default (overridable per node parameter)."""
    policies = {"best_effort": ReliabilityPolicy.BEST_EFFORT,
                "reliable": ReliabilityPolicy.RELIABLE}
    if reliability not in policies:
        raise ValueError(f"sensor_qos_reliability must be one of {sorted(policies)}, "
                         f"got {reliability!r}")
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=policies[reliability])


def tf_qos(static: bool, depth: int = 100) -> QoSProfile:
    """QoS of tf2_ros on ``/tf`` (reliable, volatile) or ``/tf_static`` (reliable, transient
    local, so that transforms latched before a subscriber existed still reach it)."""
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if static
                      else DurabilityPolicy.VOLATILE)


class StageTimes:
    """Last measured latency per named stage (milliseconds), thread-safe."""

    def __init__(self, names: Sequence[str]):
        self._lock = threading.Lock()
        self._values: Dict[str, float] = {n: float("nan") for n in names}

    def set(self, name: str, ms: float) -> None:
        with self._lock:
            self._values[name] = float(ms)

    def snapshot(self) -> Dict[str, float]:
        with self._lock:
            return dict(self._values)


class Worker:
    """One background thread draining a bounded job queue (oldest job dropped when full).

    Exceptions in a job are logged and counted, never propagated: the node keeps running and
    keeps its state. ``on_error(exc)`` lets the node report the error in its diagnostics.
    """

    def __init__(self, name: str, maxlen: int = 2,
                 on_error: Optional[Callable[[BaseException], None]] = None):
        self.name = name
        self._jobs: Deque[Tuple[str, Callable[[], None]]] = collections.deque()
        self._maxlen = maxlen
        self._cv = threading.Condition()
        self._stop = False
        self.dropped: Dict[str, int] = collections.Counter()
        self.errors = 0
        self.done = 0
        self._on_error = on_error
        self._busy = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, kind: str, job: Callable[[], None], replace_same_kind: bool = False) -> None:
        """Queue a job. With ``replace_same_kind`` a queued job of the same kind is replaced."""
        with self._cv:
            if replace_same_kind:
                for i, (k, _) in enumerate(self._jobs):
                    if k == kind:
                        del self._jobs[i]
                        self.dropped[kind] += 1
                        break
            while len(self._jobs) >= self._maxlen:
                old_kind, _ = self._jobs.popleft()
                self.dropped[old_kind] += 1
            self._jobs.append((kind, job))
            self._cv.notify()

    def pending(self) -> int:
        with self._cv:
            return len(self._jobs) + (1 if self._busy else 0)

    def queued(self, kinds: Optional[Sequence[str]] = None) -> int:
        """Jobs of ``kinds`` (all when None) waiting in the queue (not the one running)."""
        with self._cv:
            return sum(1 for kind, _ in self._jobs if kinds is None or kind in kinds)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._jobs and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                _, job = self._jobs.popleft()
                self._busy = True
            try:
                job()
            except Exception as exc:  # a bad input must never kill the worker
                self.errors += 1
                LOG.debug("worker %s job failed", self.name, exc_info=True)
                if self._on_error is not None:
                    try:
                        self._on_error(exc)
                    except Exception:
                        LOG.exception("error handler failed")
            finally:
                with self._cv:
                    self._busy = False
                    self.done += 1
                    self._cv.notify_all()

    def discard(self, kinds: Optional[Sequence[str]] = None) -> int:
        """Drop the queued jobs of ``kinds`` (all when None), counted as dropped; a running job
        finishes. Returns how many were dropped."""
        with self._cv:
            keep = collections.deque()
            n = 0
            for kind, job in self._jobs:
                if kinds is None or kind in kinds:
                    self.dropped[kind] += 1
                    n += 1
                else:
                    keep.append((kind, job))
            self._jobs = keep
            self._cv.notify_all()
        return n

    def wait_idle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._jobs or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join(timeout=5.0)


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


def guarded(node: Node, what: str, fn: Callable[[], None]) -> Callable[[], None]:
    """Wrap a timer callback so an unexpected error is logged instead of killing the node."""

    def run() -> None:
        try:
            fn()
        except Exception as exc:  # a status or TF timer must never take the node down
            if shutting_down(node):  # Ctrl-C: publishing on a shut-down context fails
                return
            node.get_logger().error(f"{what} failed: {exc!r}", throttle_duration_sec=5.0)

    return run


PRECISIONS = ("auto", "fp32", "bf16")


BACKBONE_WEIGHTS_DESCRIPTION = (
    "local weights of the checkpoint's external backbone (a MapAnything V1 folder with "
    "config.json + model.safetensors, e.g. the G2G release's map-anything-model/, or one file); "
    "needed by a converted official checkpoint, empty for checkpoints that include their "
    "backbone (the embedded defaults)")


def load_pipeline(checkpoint: str, device: str, task: str, precision: str = "auto",
                  backbone_weights: str = ""):
    """The G2G pipeline for a node: the given checkpoint, else the embedded default.

    ``precision``: ``auto`` (bf16 where it is fast, see ``G2GPipeline``), ``fp32`` (what
    ``g2g-eval`` runs: bag evaluations use it so that both give the same numbers) or ``bf16``.
    ``backbone_weights``: see :data:`BACKBONE_WEIGHTS_DESCRIPTION` (the node parameter).
    Raises ``ValueError`` / ``FileNotFoundError`` with the reason for a bad checkpoint,
    backbone weights that are missing, wrong or do not belong to the checkpoint, or a bad
    precision.
    """
    from g2g_model.inference import G2GPipeline

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if checkpoint:
        pipeline = G2GPipeline.from_checkpoint(checkpoint, device=device,
                                               backbone_weights=backbone_weights or None)
    elif backbone_weights:
        raise ValueError(f"backbone_weights={backbone_weights!r} needs a checkpoint for that "
                         "backbone (parameter checkpoint, e.g. a converted official release); "
                         "the embedded default includes its own backbone")
    else:
        pipeline = G2GPipeline.default(task, device=device)
    if precision != "auto":
        pipeline.bf16 = precision == "bf16"
    return pipeline


def describe_model(pipeline, checkpoint: str, task: str) -> str:
    """What a node loaded, for its start-up log: the checkpoint file (the embedded default's
    name when ``checkpoint`` is empty), backbone and preset; says so for random weights."""
    from g2g_model.inference import default_checkpoint

    if pipeline.untrained:
        return f"untrained stand-in for {task} (RANDOM weights)"
    header = pipeline.header
    source = checkpoint or f"embedded default {default_checkpoint(task).name}"
    backbone = (header.get("backbone") or {}).get("name", "?")
    preset = header.get("preset") or "custom config"
    return f"{source} (backbone {backbone}, {preset})"


def spin_node(node_class, args=None, threads: int = 2) -> None:
    """The standard node entry point: init, spin a multi-threaded executor, clean shutdown.

    Ctrl-C ends the node quietly with exit status 0. Under ``ros2 launch`` a node gets SIGINT
    twice (from the terminal's process group and forwarded by launch); the second one used to
    interrupt the teardown (exit -2), so further SIGINTs are ignored once shutdown began.
    """
    import signal

    import rclpy
    from rclpy._rclpy_pybind11 import RCLError
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

    from g2g_ros.malloc_arenas import limit_malloc_arenas

    limit_malloc_arenas()  # before the executor's and the worker's threads allocate
    rclpy.init(args=args)
    node = None
    try:
        node = node_class()
        executor = MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RCLError:
        # SIGINT shuts the context down from rclpy's signal handler; an executor that is
        # building its next wait set at that moment raises instead of returning. Only then is
        # it a clean shutdown.
        if rclpy.ok():
            raise
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


def shutting_down(node: Node) -> bool:
    """True once the node's context is shut down (Ctrl-C): publishing fails then, and that is
    not an error worth reporting."""
    return not node.context.ok()
