"""docs/PARAMETERS.md is what the nodes declare today: regenerated from the nodes (started,
configured and activated in this process) and compared. When it fails, run ``make docs``
(``python -m g2g_ros.node_docs``) and commit the page."""

import pytest

pytest.importorskip("rclpy")

from g2g_ros import node_docs  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]


def test_parameters_page_is_current():
    text = node_docs.render()
    assert node_docs.DOC.read_text() == text, \
        f"{node_docs.DOC} is not current: run `make docs` and commit it"
    # The page covers what a user looks for: each node, its topics, services and parameters.
    for node, wanted in {"rig_odometry": ["`odometry`", "`~/reset`", "`verify_max_deferred`"],
                         "relocalize": ["`~/load_map`", "`/initialpose`", "`map_path`"],
                         "map_builder": ["`~/save_map`", "`max_keyframes`"]}.items():
        section = text.split(f"## `{node}`")[1].split("\n## ")[0]
        for w in wanted:
            assert w in section, (node, w)


def test_graph_names_are_written_as_the_code_writes_them():
    ns = node_docs.NAMESPACE
    rel = node_docs.relative_name
    assert rel(f"/{ns}/relocalize/status", "relocalize", ["cam0"]) == "~/status"
    assert rel(f"/{ns}/odometry", "rig_odometry", ["cam0"]) == "odometry"
    assert rel(f"/{ns}/cam3/image_raw", "rig_odometry", ["cam0", "cam3"]) == "<cam>/image_raw"
    assert rel("/tf_static", "relocalize", ["cam0"]) == "/tf_static"
