"""Procedural multi-camera indoor simulator (CPU, deterministic, headless).

``scene`` (rooms, doors, furniture, posters, seasons), ``textures``, ``renderer`` (analytic ray
casting, RGB + metric depth), ``rigs``, ``occupancy``, ``trajectory``, ``generate`` and ``cli``
(``g2g-sim``).
"""
