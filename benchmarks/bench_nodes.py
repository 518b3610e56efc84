"""rig_odometry under a live 5-camera stream (640x480 rgb8 by default; any size, raw or JPEG).

A publisher in this process sends 5 cameras of images (640x480 rgb8: simulator renders upscaled;
another `--size`: rendered at that size, optionally as JPEG `CompressedImage`, `--jpeg`)
with camera_info, stamped with the wall clock, plus the rig extrinsics on /tf_static. The
messages are serialized once before the run and published as serialized bytes with only the
header stamp rewritten (building and serializing one 0.9 MB Image in rclpy costs ~100 ms, which
would make the benchmark's publisher, not the node, the bottleneck on 2 cores). The
rig_odometry node runs as its own process with the embedded default model. Per rate:

* groups published / processed by the node (its own counter) and dropped;
* stamp-to-publish latency of `odometry` (receive time - image stamp; both wall clock, same
  machine): median and p95;
* the node's time per group, split from its status (medians over the run): transport +
  synchronization + queue wait (latency - the node's total), image conversion, model (encode +
  g2g), verification and bookkeeping (the rest of the odometry step), publishing;
* CPU seconds per published group of the node and of the publisher (/proc), and the node's
  resident memory (first / last third of the run).

Both processes use `config/fastdds_large_shm.xml` (the README's advice for large images; a
burst of 5 x 0.9 MB does not fit Fast DDS' default 512 KB shared-memory segment, and with
reliable QoS the resent images arrive too late for the synchronizer); `--dds-profile default`
measures without it.

    python -m benchmarks.bench_nodes --rates 5 10 --duration 90 [--no-verify]
    python -m benchmarks.bench_nodes --rates 5 --size 1936x1216 --jpeg 90   # full-size JPEG
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import cv2
import numpy as np

from benchmarks.common import ROOT, emit_report, machine_info, machine_line

CAMERAS = ["cam0", "cam1", "cam2", "cam3", "cam4"]
# CDR encapsulation header (4 bytes) then std_msgs/Header: stamp.sec int32, stamp.nanosec uint32.
STAMP_OFFSET = 4


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def restamp(serialized: bytes, stamp_ns: int) -> bytes:
    """A copy of a serialized message whose first field is a std_msgs/Header with the stamp
    replaced (little- or big-endian CDR, as its encapsulation header says)."""
    order = "<" if serialized[1] & 1 else ">"
    out = bytearray(serialized)
    struct.pack_into(order + "iI", out, STAMP_OFFSET, stamp_ns // 10**9, stamp_ns % 10**9)
    return bytes(out)


def sim_images(size=(640, 480)):
    from g2g_model.data.format import TrajectoryReader
    from g2g_model.data.sim.generate import SimConfig, generate_trajectory

    out = tempfile.mkdtemp(prefix="g2g_bench_nodes_")
    cfg = SimConfig(scene_preset="small", rig_preset="ring5", traversals=1, frames=20,
                    with_depth=False)
    reader = TrajectoryReader(generate_trajectory(out, seed=20011, traversal=0, cfg=cfg)["path"])
    sx, sy = size[0] / 224.0, size[1] / 224.0
    frames = [[cv2.resize(reader.image(c, i), size) for c in CAMERAS]
              for i in range(reader.num_frames)]
    ks = []
    for c in CAMERAS:
        k = reader.rig[c].K.copy()
        k[0] *= sx
        k[1] *= sy
        k[2] = [0, 0, 1]
        ks.append(k)
    return frames, ks, [reader.rig[c].T_body_cam for c in CAMERAS]


def native_images(size, frames: int = 20):
    """``frames`` instants of the ring5 rig rendered at ``size`` (one ray per pixel: native
    detail, what a JPEG of a real camera has to carry), with their K and extrinsics."""
    from benchmarks.bench_fullsize import Scene

    scene = Scene(size)
    images = [[scene.image(0, i, c) for c in range(len(CAMERAS))] for i in range(frames)]
    return images, [scene.K] * len(CAMERAS), list(scene.T_body_cam)


def serialized_stream(frames, ks, jpeg_quality: int = 0) -> List[List[bytes]]:
    """Per frame, per camera: (camera_info, image) serialized once, stamp 0; with
    ``jpeg_quality`` the image is a JPEG ``CompressedImage`` of that quality."""
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import CompressedImage, Image

    from g2g_ros.calibration import camera_info_msg
    from g2g_ros.image_conversion import image_msg, jpeg_msg

    def image(img, frame):
        return jpeg_msg(img, frame, 0, jpeg_quality) if jpeg_quality else image_msg(img, frame, 0)

    h, w = frames[0][0].shape[:2]
    out = [[(serialize_message(camera_info_msg(k, w, h, f"{c}_optical_frame", 0)),
             serialize_message(image(img, f"{c}_optical_frame")))
            for c, img, k in zip(CAMERAS, imgs, ks)] for imgs in frames]
    check = deserialize_message(restamp(out[0][0][1], 1234 * 10**9 + 5678),
                                CompressedImage if jpeg_quality else Image)
    if (check.header.stamp.sec, check.header.stamp.nanosec) != (1234, 5678):
        raise RuntimeError("restamp() did not hit the header stamp of the serialized Image")
    return out


def verification_split(frames, ks, extr, reps: int = 3) -> str:
    """Where a rig-odometry verification of these images spends its time with the node's
    defaults (in this process, before the node starts; medians of ``reps`` steps between
    consecutive frames)."""
    from g2g_model.estimation.groups import Group
    from g2g_model.localization.rig_motion import RigMotionVerifier, overlapping_pairs

    describe, match, step = [], [], []
    for i in range(reps):
        verifier = RigMotionVerifier()
        groups = [Group(images=frames[j], intrinsics=np.stack(ks), cam_to_world=np.stack(extr))
                  for j in (i, i + 1)]
        pairs = overlapping_pairs(groups[0], groups[1], verifier.config.max_turn_deg)
        t0 = time.perf_counter()
        feats = [[verifier.local.describe(im) for im in frames[j]] for j in (i, i + 1)]
        t1 = time.perf_counter()
        for a, b in pairs:
            verifier.local.match(feats[0][a].descriptors, feats[1][b].descriptors)
        t2 = time.perf_counter()
        verifier(groups[0], groups[1], np.eye(4))
        describe.append((t1 - t0) / 2)
        match.append(t2 - t1)
        step.append(time.perf_counter() - t2)
    keypoints = np.mean([len(f.keypoints) for side in feats for f in side])
    cfg = verifier.config
    return (f"- verification of one keyframe step with the node's defaults (features of images "
            f"downscaled to {cfg.max_image_px} px, at most {cfg.max_features} each; camera "
            f"pairs for turns up to {cfg.max_turn_deg:g} deg), profiled in the benchmark "
            f"process before the node starts (median of {reps}): SIFT of the 5 new "
            f"{frames[0][0].shape[1]}x{frames[0][0].shape[0]} images "
            f"{1e3 * statistics.median(describe):.0f} ms ({keypoints:.0f} keypoints "
            f"each), matching the {len(pairs)} camera pairs "
            f"{1e3 * statistics.median(match):.0f} ms, the whole verification with cached "
            f"features (matching + PoseLib + covariance) "
            f"{1e3 * statistics.median(step):.0f} ms")


def median_stage(statuses, name: str) -> float:
    vals = [dict(zip(s.stage_names, s.stage_latency_ms)).get(name) for s in statuses]
    vals = [v for v in vals if v is not None and v > 0]
    return statistics.median(vals) if vals else float("nan")


def run_rate(node, pubs, stream, rate: float, duration: float, node_pid: int) -> Dict:
    import rclpy

    latencies, statuses, diag = node.g2g_latencies, node.g2g_statuses, node.g2g_diagnostics
    latencies.clear()
    statuses.clear()
    diag.clear()
    while not statuses or not diag:  # the node's counters at the start of this rate
        rclpy.spin_once(node, timeout_sec=0.1)
    first, first_diag = statuses[-1], dict(diag)
    rss: List[float] = []
    sent = 0
    cpu0 = (cpu_seconds(node_pid), cpu_seconds(os.getpid()))
    t0 = time.monotonic()
    next_pub, next_rss = t0, t0
    while time.monotonic() - t0 < duration:
        now = time.monotonic()
        if now >= next_pub:
            stamp = time.time_ns()
            for (info_pub, img_pub), (info, img) in zip(pubs, stream[sent % len(stream)]):
                info_pub.publish(restamp(info, stamp))
                img_pub.publish(restamp(img, stamp))
            sent += 1
            next_pub += 1.0 / rate
        if now >= next_rss:
            rss.append(rss_mb(node_pid))
            next_rss += 5.0
        rclpy.spin_once(node, timeout_sec=max(0.0, min(0.005, next_pub - time.monotonic())))
    cpu1 = (cpu_seconds(node_pid), cpu_seconds(os.getpid()))
    end = time.monotonic() + 5
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    last = statuses[-1]
    lat = sorted(1e3 * x for x in latencies)
    return {
        "rate": rate, "duration": duration, "sent": sent, "received": len(lat),
        "processed": last.groups_processed - first.groups_processed,
        "dropped": last.groups_dropped - first.groups_dropped,
        "median": statistics.median(lat) if lat else float("nan"),
        "p95": lat[int(0.95 * (len(lat) - 1))] if lat else float("nan"),
        "stages": {n: median_stage(statuses, n)
                   for n in ("convert", "encode", "g2g", "publish", "total")},
        "cpu_node": (cpu1[0] - cpu0[0]), "cpu_pub": (cpu1[1] - cpu0[1]),
        "rss": rss, "untrained": "untrained" in last.message,
        "drops": {k.split(" ", 1)[1]: int(diag[k]) - int(first_diag.get(k, 0)) for k in diag
                  if k.startswith("groups_dropped ") and int(diag[k]) > int(first_diag.get(k, 0))},
        # Keyframe steps by path, and groups published before their verification (deferred).
        "steps": {k: int(diag[k]) - int(first_diag.get(k, 0)) for k in diag
                  if k.startswith("steps ") or k == "groups_deferred_verification"},
    }


def describe(r: Dict, what: str) -> List[str]:
    st = r["stages"]
    model = st["encode"] + st["g2g"]
    verify = st["total"] - st["convert"] - model - st["publish"]
    wait = r["median"] - st["total"]
    third = max(1, len(r["rss"]) // 3)
    share = 100.0 * r["processed"] / max(r["sent"], 1)
    return [
        f"## rig_odometry, 5 cameras x {what} at {r['rate']:g} Hz for "
        f"{r['duration']:.0f} s",
        f"- groups published: {r['sent']}; processed by the node: {r['processed']} "
        f"(**{share:.1f} %**); dropped by the node: {r['dropped']}; odometry messages "
        f"received: {r['received']}; the node's drops by reason: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(r['drops'].items())) or 'none'}",
        f"- processed groups by what made their motion: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(r['steps'].items()) if v) or 'none'} "
        f"(`steps <path>`: keyframe steps; `groups_deferred_verification`: published with "
        f"G2G's motion from the last keyframe because a newer group was already queued)",
        f"- stamp-to-publish latency: median {r['median']:.0f} ms, p95 {r['p95']:.0f} ms",
        f"- node time per group (medians of its status): convert {st['convert']:.0f} ms, "
        f"model (encode + g2g) {model:.0f} ms, verification and bookkeeping {verify:.0f} ms, "
        f"publish {st['publish']:.1f} ms, total {st['total']:.0f} ms; transport + "
        f"synchronization + queue wait (median latency - total) {wait:.0f} ms",
        f"- node's own overhead per group (latency - model - verification): "
        f"{r['median'] - model - verify:.0f} ms",
        f"- CPU per published group: node {1e3 * r['cpu_node'] / max(r['sent'], 1):.0f} ms, "
        f"publisher {1e3 * r['cpu_pub'] / max(r['sent'], 1):.1f} ms (of "
        f"{2e3 / r['rate']:.0f} ms of 2 cores per group period)",
        f"- node RSS: first third mean {np.mean(r['rss'][:third]):.0f} MB, last third mean "
        f"{np.mean(r['rss'][-third:]):.0f} MB, max {max(r['rss']):.0f} MB "
        f"({len(r['rss'])} samples)",
    ]


def run(duration: float, rates: List[float], verify: bool, dds_profile: str,
        size=(640, 480), jpeg_quality: int = 0) -> str:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CameraInfo, CompressedImage, Image

    from g2g_msgs.msg import EstimatorStatus
    from g2g_ros.tf_broadcaster import TransformBroadcaster
    from g2g_ros.conversions import header_ns, matrix_to_transform_stamped

    at_start = machine_line()
    if tuple(size) == (640, 480):
        frames, ks, extr = sim_images()
    else:
        frames, ks, extr = native_images(size)
    encoding = f"JPEG (quality {jpeg_quality})" if jpeg_quality else "rgb8"
    what = f"{size[0]}x{size[1]} {encoding}"
    split = verification_split(frames, ks, extr) if verify else ""
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               ROS_DOMAIN_ID=str(80 + os.getpid() % 10))
    env.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    if dds_profile == "large_shm":
        env["FASTDDS_DEFAULT_PROFILES_FILE"] = str(ROOT / "config" / "fastdds_large_shm.xml")
    os.environ.clear()
    os.environ.update(env)
    node_proc = subprocess.Popen(
        [sys.executable, "-m", "g2g_ros.nodes.rig_odometry", "--ros-args", "-p",
         "cameras:=[" + ",".join(CAMERAS) + "]", "-p", "sensor_qos_reliability:=reliable",
         "-p", "sync_slop_ms:=5.0", "-p", f"verify:={'true' if verify else 'false'}",
         "-p", f"use_compressed:={'true' if jpeg_quality else 'false'}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    rclpy.init()
    stream = serialized_stream(frames, ks, jpeg_quality)
    node = rclpy.create_node("g2g_bench_publisher")
    qos = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
    pubs = [(node.create_publisher(CameraInfo, f"{c}/camera_info", qos),
             node.create_publisher(CompressedImage, f"{c}/image_raw/compressed", qos)
             if jpeg_quality else node.create_publisher(Image, f"{c}/image_raw", qos))
            for c in CAMERAS]
    static = TransformBroadcaster(node, static=True)
    static.send([matrix_to_transform_stamped(T, "base_link", f"{c}_optical_frame",
                                             time.time_ns()) for c, T in zip(CAMERAS, extr)])
    node.g2g_latencies, node.g2g_statuses = [], []
    node.create_subscription(
        Odometry, "odometry",
        lambda m: node.g2g_latencies.append((time.time_ns() - header_ns(m.header)) * 1e-9), 10)
    node.create_subscription(EstimatorStatus, "rig_odometry/status", node.g2g_statuses.append,
                             10)
    node.g2g_diagnostics = {}
    node.create_subscription(
        DiagnosticArray, "/diagnostics", lambda m: node.g2g_diagnostics.update(
            {kv.key: kv.value for st in m.status if "rig_odometry" in st.name
             for kv in st.values}), 10)
    start = time.monotonic()
    while not node.g2g_statuses and time.monotonic() - start < 120:
        rclpy.spin_once(node, timeout_sec=0.1)
    results = []
    try:
        for rate in rates:
            results.append(run_rate(node, pubs, stream, rate, duration, node_proc.pid))
            print(f"  {rate:g} Hz: processed {results[-1]['processed']} of "
                  f"{results[-1]['sent']} groups", flush=True)
    finally:
        node_proc.send_signal(2)
        node_proc.wait(timeout=20)
        node.destroy_node()
        rclpy.shutdown()
    lines = ["## Machine", *machine_info(), f"- at the start: {at_start}",
             f"- at the end: {machine_line().rsplit(' | ', 1)[-1]}", "",
             f"rig_odometry with `verify:={str(verify).lower()}`; model: "
             f"{'RANDOM weights' if results[0]['untrained'] else 'embedded default'}; "
             "publisher: pre-serialized messages (stamp rewritten), same 2 cores; Fast DDS "
             + ("profile config/fastdds_large_shm.xml" if dds_profile == "large_shm" else
                "defaults (512 KB shared-memory segment)"), *([split] if split else []), ""]
    for r in results:
        lines += describe(r, what) + [""]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=120.0, help="seconds per rate")
    parser.add_argument("--rates", type=float, nargs="+", default=[5.0, 10.0])
    parser.add_argument("--no-verify", action="store_true",
                        help="run the node with verify:=false (model only)")
    parser.add_argument("--dds-profile", choices=("large_shm", "default"), default="large_shm",
                        help="Fast DDS profile of both processes (see the docstring)")
    parser.add_argument("--size", default="640x480",
                        help="camera images WIDTHxHEIGHT: 640x480 (simulator renders "
                             "upscaled) or any other (rendered at that size)")
    parser.add_argument("--jpeg", type=int, default=0, metavar="QUALITY",
                        help="publish JPEG CompressedImage of this quality (node: "
                             "use_compressed:=true); 0: raw rgb8")
    parser.add_argument("--output", default=None)
    opts = parser.parse_args(argv)
    try:
        size = tuple(int(v) for v in opts.size.lower().split("x"))
        assert len(size) == 2 and min(size) > 0
    except (ValueError, AssertionError):
        parser.error(f"--size must be WIDTHxHEIGHT, got {opts.size!r}")
    if not 0 <= opts.jpeg <= 100:
        parser.error(f"--jpeg must be a quality in 1..100 (0: raw), got {opts.jpeg}")
    emit_report("Node benchmark", "benchmarks.bench_nodes", argv,
                run(opts.duration, opts.rates, not opts.no_verify, opts.dds_profile, size,
                    opts.jpeg), opts.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
