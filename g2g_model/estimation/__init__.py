"""The pose estimator: two image groups in, T_{A0<-Bj} out (ARCHITECTURE §2).

Modules: :mod:`.groups` (image groups as users hand them: checks, resizing, re-anchoring),
:mod:`.pipeline` (``G2GPipeline``: backbone + G2G modules, both directions, fused),
:mod:`.rotation_matching` (the rotation from cross-group feature matches) and
:mod:`.match_geometry` (two-view geometry of the matched rays).
"""
