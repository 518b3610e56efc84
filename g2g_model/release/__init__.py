"""The official G2G release: :mod:`.prepare` (find, verify and convert the released files, the
manifest and the ROS parameter file) and :mod:`.cli` (``g2g-weights``)."""
