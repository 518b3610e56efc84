"""The evaluation replay's wait per group under two Fast DDS transport settings.

`g2g-eval-bag` plays a bag group by group and waits for the node's answer to each one. A group
of five 224 px images (750 KB) is larger than Fast DDS' default shared-memory segment (512 KB):
the player overwrites its own buffers and the reliable subscriber waits for repairs. Since the
players use ``config/fastdds_large_shm.xml`` (``g2g_ros.qos.prefer_large_shm_profile``), a group
fits. This benchmark replays the same simulator bag (ring5 rig, rig_odometry node, embedded
default) under a profile equal to Fast DDS' built-in transports (shared memory with the default
512 KB segment, plus UDPv4) and under the large-segment profile, alternating, each run in a
fresh process (Fast DDS reads its profile once per process), and prints the wait per group
(publish -> the node's odometry) and the ratio. The machine is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

from benchmarks.common import ROOT, emit_report, machine_info, machine_line

DEFAULT_TRANSPORTS = """<?xml version="1.0" encoding="UTF-8" ?>
<profiles xmlns="http://www.eprosima.com">
  <transport_descriptors>
    <transport_descriptor><transport_id>shm</transport_id><type>SHM</type>
      <segment_size>524288</segment_size></transport_descriptor>
    <transport_descriptor><transport_id>udp</transport_id><type>UDPv4</type></transport_descriptor>
  </transport_descriptors>
  <participant profile_name="builtin_equivalent" is_default_profile="true"><rtps>
    <userTransports><transport_id>shm</transport_id><transport_id>udp</transport_id></userTransports>
    <useBuiltinTransports>false</useBuiltinTransports></rtps></participant>
</profiles>
"""
ONE_REPLAY = """
import json, pathlib, sys
from g2g_ros.bags.eval_bag import evaluate_bag
report = evaluate_bag(pathlib.Path(sys.argv[1]), "rig_odometry", pathlib.Path(sys.argv[2]),
                      startup_timeout=120, progress=False)
print(json.dumps({"waits_ms": report["latency"]["replay_wait_ms"],
                  "timeouts": report["replay"]["wait_timeouts"]}))
"""


def make_bag(work: pathlib.Path, frames: int) -> pathlib.Path:
    from g2g_model.data.sim.generate import SimConfig, generate_trajectory
    from g2g_ros.bags.convert import convert_trajectory

    cfg = SimConfig(scene_preset="small", rig_preset="ring5", traversals=1, frames=frames,
                    with_depth=False)
    traj = generate_trajectory(str(work / "sim"), seed=20003, traversal=0, cfg=cfg)["path"]
    bag = work / "replay.mcap"
    convert_trajectory(pathlib.Path(traj), bag, progress=False)
    return bag


def replay(bag: pathlib.Path, profile: pathlib.Path, out: pathlib.Path, domain: int) -> dict:
    env = dict(os.environ, FASTDDS_DEFAULT_PROFILES_FILE=str(profile),
               ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               RMW_IMPLEMENTATION="rmw_fastrtps_cpp")
    run = subprocess.run([sys.executable, "-c", ONE_REPLAY, str(bag), str(out)], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    if run.returncode:
        raise RuntimeError(f"replay under {profile.name} failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="replays per profile")
    parser.add_argument("--frames", type=int, default=15, help="frames (groups) in the bag")
    parser.add_argument("--output", help="also write the report here (markdown)")
    opts = parser.parse_args(argv)
    print(machine_line(), flush=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="g2g_bench_replay_"))
    bag = make_bag(work, opts.frames)
    builtin = work / "builtin_equivalent.xml"
    builtin.write_text(DEFAULT_TRANSPORTS)
    profiles = {"built-in transports (512 KB segment)": builtin,
                "config/fastdds_large_shm.xml (32 MB)": ROOT / "config" / "fastdds_large_shm.xml"}
    means = {name: [] for name in profiles}
    rows = []
    for k in range(opts.repeats):
        for i, (name, path) in enumerate(profiles.items()):
            result = replay(bag, path, work / f"out_{k}_{i}", 60 + (os.getpid() + k) % 30)
            waits = result["waits_ms"]
            means[name].append(waits["mean"])
            rows.append(f"| {k + 1} | {name} | {waits['n']} | {waits['mean']:.0f} | "
                        f"{waits['median']:.0f} | {waits['max']:.0f} | {result['timeouts']} |")
            print(rows[-1], flush=True)
    base, large = (statistics.median(v) for v in means.values())
    body = "\n".join(
        ["Machine:", *machine_info(), f"- load average at the end: {os.getloadavg()[0]:.1f}", "",
         f"Bag: {opts.frames} groups of 5 x 224x224 rgb8 (simulator scene 20003, ring5), "
         "reliable QoS; node rig_odometry, embedded default, `use_sim_time`.", "",
         "| run | profile | groups | wait mean (ms) | median | max | timeouts |",
         "|---|---|---|---|---|---|---|", *rows, "",
         f"Median of the per-run means: {base:.0f} ms with the built-in transports, "
         f"{large:.0f} ms with the large segment: {base / large:.1f}x."])
    emit_report("Evaluation replay: wait per group by Fast DDS profile",
                "benchmarks.bench_replay_dds", argv, body, opts.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
