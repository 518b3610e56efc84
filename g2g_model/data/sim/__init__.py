"""Procedural multi-camera simulator, indoors and outdoor-like (CPU, deterministic, headless).

``scene`` (rooms, doors, furniture, posters, seasons; street and courtyard presets),
``textures`` and ``photos`` (photographs as surface textures), ``lighting`` (random sun, lamp and
ambient gains), ``exposure`` (per-camera gain and gamma), ``renderer`` (analytic ray casting,
RGB + metric depth), ``rigs``, ``occupancy``, ``trajectory`` (walking to car motion),
``generate`` and ``cli`` (``g2g-sim``).
"""
