"""rosbag2 (MCAP) bags of G2G datasets and of node outputs: conversion, replay, evaluation.

* :mod:`.typestore` -- the message types (ROS 2 standard + g2g_msgs) and QoS of bag topics;
* :mod:`.bag_reader` -- opening a bag with clear errors (missing, corrupt, lacking topics);
* :mod:`.bag_writer` -- writing a bag of the G2G layout (shared by the converters);
* :mod:`.convert` -- dataset trajectory -> bag (``g2g-bag convert``);
* :mod:`.ros1_topics`, :mod:`.ros1` -- ROS 1 bag -> bag with a topic map
  (``g2g-bag from-ros1``);
* :mod:`.player` -- bag -> live topics with ``/clock``, optionally paced by the nodes
  (``g2g-bag play``);
* :mod:`.recorder` -- live topics -> bag (the node outputs during an evaluation);
* :mod:`.evaluation` -- metrics of recorded outputs against the bag's ground truth;
* :mod:`.report` -- Markdown / JSON report and trajectory plots;
* :mod:`.eval_pairs` -- the evaluated pairs as a ``g2g-eval`` pair index;
* :mod:`.eval_bag` -- ``g2g-eval-bag``: graph + replay + recording + report.
"""
