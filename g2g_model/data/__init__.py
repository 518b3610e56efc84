"""Data side of G2G: the dataset format, the simulator, converters, overlap labels, mining.

Modules (import what you need; nothing is imported here to keep start-up light):
``format`` (writer / reader, see docs/DATASET_FORMAT.md), ``rig``, ``splits`` (scene seed ranges),
``overlap``, ``mining``, ``pose_interp``, ``convert_nclt``, ``convert_zjh``, ``stats``, ``cli``
(``g2g-data``) and the ``sim`` package (``g2g-sim``).
"""
