"""The evaluation of `make demo`: recorded node outputs against ground truth, a table and a
trajectory plot (see :mod:`g2g_ros.demo`)."""

from __future__ import annotations

import pathlib

import numpy as np


def evaluate(map_traj, query_traj, data, out: pathlib.Path, camera: str) -> str:
    """The demo's table: the nodes' recorded outputs against ground truth, with G2G alone,
    the classical baseline and "no motion" on exactly the same windows and keyframe steps."""
    from g2g_model.baseline.classical import ClassicalBaseline
    from g2g_model.data.format import TrajectoryReader
    from g2g_model.geometry import invert_pose
    from g2g_model.groups import Group
    from g2g_model.inference import G2GPipeline
    from g2g_model.metrics import format_markdown_table, pose_errors, summarize_errors
    from g2g_ros.pose_msgs import pose_msg_to_matrix
    from g2g_ros.stamps import stamp_ns

    mreader, qreader = TrajectoryReader(map_traj), TrajectoryReader(query_traj)
    m_index = {int(t): i for i, t in enumerate(mreader.timestamps_ns)}
    q_index = {int(t): i for i, t in enumerate(qreader.timestamps_ns)}
    baseline = ClassicalBaseline()
    q_cam = qreader.world_T_cam(camera)
    K = qreader.rig[camera].K

    # --- relocalization: the node's windows, G2G vs classical on the same frames
    g2g_pred, cls_pred, gts = [], [], []
    for align in data["alignment"]:
        ia = [m_index[stamp_ns(s)] for s in align.stamps_a]
        ib = [q_index[stamp_ns(s)] for s in align.stamps_b]
        map_camera = align.group_a_id.split(":")[2]  # "map:<id>:<camera>:<stamp>"
        m_cam, Km = mreader.world_T_cam(map_camera), mreader.rig[map_camera].K
        gts.append(invert_pose(m_cam[ia[0]]) @ q_cam[ib[0]])
        g2g_pred.append(pose_msg_to_matrix(align.poses_b[0]))
        res = baseline.predict(([mreader.image(map_camera, i) for i in ia], Km, m_cam[ia]),
                               ([qreader.image(camera, i) for i in ib], K, q_cam[ib]))
        cls_pred.append(res.pose_b0)
    summaries = {}
    if gts:
        summaries["relocalization G2G alone (T_A0<-B0, the node's windows)"] = \
            summarize_errors(pose_errors(g2g_pred, gts))
        summaries["relocalization classical, same windows"] = summarize_errors(
            pose_errors(cls_pred, gts))
        # "No motion" predicts the identity: any useful method must beat it.
        summaries["relocalization 'no motion' reference"] = summarize_errors(
            pose_errors(np.stack([np.eye(4)] * len(gts)), gts))

    # --- corrected robot pose vs drifting odometry alone (position error in metres)
    gt_body = {int(t): qreader.world_T_body[i] for i, t in enumerate(qreader.timestamps_ns)}
    poses = {stamp_ns(p.header.stamp): pose_msg_to_matrix(p.pose.pose) for p in data["pose"]}
    err_at = {s: float(np.linalg.norm(T[:3, 3] - gt_body[s][:3, 3])) for s, T in poses.items()
              if s in gt_body}
    corr_err = list(err_at.values())
    # --- the published fixes (G2G + geometric verification) as T_A0<-B0 on the same windows
    base_T_cam0 = qreader.rig[camera].T_body_cam
    fixes = [(invert_pose(mreader.world_T_cam(a.group_a_id.split(":")[2])[
        m_index[stamp_ns(a.stamps_a[0])]]) @ poses[stamp_ns(a.header.stamp)] @ base_T_cam0, gt)
        for a, gt in zip(data["alignment"], gts) if stamp_ns(a.header.stamp) in poses]
    if fixes:
        summaries["relocalization published fix (G2G + verification)"] = summarize_errors(
            pose_errors([f for f, _ in fixes], [g for _, g in fixes]))
    paths = [(a.path or "g2g", err_at.get(stamp_ns(a.header.stamp), np.nan))
             for a in data["alignment"]]

    # --- rig odometry: consecutive keyframes, G2G node vs classical on the same rig pairs
    odo = [(stamp_ns(o.header.stamp), pose_msg_to_matrix(o.pose.pose)) for o in data["odometry"]]
    odo = [(s, T) for s, T in odo if s in q_index]
    rig_g2g, rig_cls, rig_gt, rig_alone = [], [], [], []
    rig_model = G2GPipeline.default("rig_odometry")
    cams = qreader.cameras
    body_T = qreader.rig.T_body_cams()
    for (s0, T0), (s1, T1) in list(zip(odo, odo[1:]))[:12]:
        i0, i1 = q_index[s0], q_index[s1]
        rig_gt.append(invert_pose(qreader.world_T_body[i0]) @ qreader.world_T_body[i1])
        rig_g2g.append(invert_pose(T0) @ T1)
        res = baseline.predict(([qreader.image(c, i0) for c in cams], qreader.rig.intrinsics(),
                                body_T), ([qreader.image(c, i1) for c in cams],
                                          qreader.rig.intrinsics(), body_T))
        # classical gives T_{cam0(t0) <- cam0(t1)}; move it to the body frame
        rig_cls.append(body_T[0] @ res.pose_b0 @ invert_pose(body_T[0]))
        # G2G alone on the same step: the rig at both keyframes (body frame = that instant)
        pred = rig_model.predict(*(Group([qreader.image(c, i) for c in cams],
                                         qreader.rig.intrinsics(), body_T) for i in (i0, i1)))
        rig_alone.append(body_T[0] @ pred.poses_b[0] @ invert_pose(body_T[0]))
    if rig_gt:
        summaries["rig odometry node: G2G + verification (per keyframe step)"] = summarize_errors(
            pose_errors(rig_g2g, rig_gt))
        summaries["rig odometry G2G alone, same steps"] = summarize_errors(
            pose_errors(rig_alone, rig_gt))
        summaries["rig odometry classical, same steps"] = summarize_errors(
            pose_errors(rig_cls, rig_gt))
        summaries["rig odometry 'no motion' reference"] = summarize_errors(
            pose_errors(np.stack([np.eye(4)] * len(rig_gt)), rig_gt))
    cols = ("n", "n_failed", "rot_err_mean", "rot_err_median", "trans_err_mean",
            "trans_err_median", "rra@5", "rta@15")
    table = format_markdown_table(summaries, columns=cols, title="method") if summaries else \
        "(no outputs recorded)\n"
    drift = [np.linalg.norm(qreader.world_T_body[0][:3, 3] - qreader.world_T_body[-1][:3, 3])]
    lines = [table]
    if corr_err:
        lines.append(f"relocalized robot position vs ground truth: mean {np.mean(corr_err):.3f} "
                     f"m, median {np.median(corr_err):.3f} m over {len(corr_err)} fixes")
    if paths:
        counts = {k: [p for p, _ in paths].count(k) for k in ("verified", "refined", "g2g")}
        lines.append(f"fixes by path: {counts['verified']} verified, {counts['refined']} refined"
                     f" (geometry corrected G2G), {counts['g2g']} G2G alone; per fix: "
                     + ", ".join(f"{p} {e:.3f} m" for p, e in paths))
    lines.append(f"query traversal: {qreader.num_frames} frames, start-to-end "
                 f"{drift[0]:.1f} m; odometry drift injected: 2 %/m scale, 1 deg/m heading")
    _plot(qreader, odo, data, out)
    return "\n".join(lines)


def _plot(qreader, odo, data, out: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from g2g_ros.pose_msgs import pose_msg_to_matrix

    gt = qreader.world_T_body
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.plot(gt[:, 0, 3], gt[:, 1, 3], "k-", label="ground truth")
    if odo:
        # odometry starts at the identity: express it in the world frame of the first frame
        w0 = gt[0]
        pts = np.stack([(w0 @ T)[:3, 3] for _, T in odo])
        ax.plot(pts[:, 0], pts[:, 1], "b.-", label="rig odometry (G2G + verification)")
    if data["pose"]:
        pts = np.stack([pose_msg_to_matrix(p.pose.pose)[:3, 3] for p in data["pose"]])
        ax.plot(pts[:, 0], pts[:, 1], "r*", markersize=10, label="relocalized poses")
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.legend()
    ax.set_title("demo: query traversal (top view)")
    fig.tight_layout()
    fig.savefig(out / "trajectories.png", dpi=120)
    plt.close(fig)
