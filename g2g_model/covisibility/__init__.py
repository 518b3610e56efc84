"""Covisibility front-end: score map frames against query frames from cached encoder tokens and
select the map window to localize against (ARCHITECTURE §4).

Modules: :mod:`.model` (decoder), :mod:`.scoring` (T_A x T_B score matrix), :mod:`.retrieval`
(window selection), :mod:`.front_end` (score + select in one call), :mod:`.labels` (dense
labels from depth), :mod:`.samples` (training sample files), :mod:`.loss`, :mod:`.train`,
:mod:`.evaluate`, :mod:`.checkpoint`, :mod:`.synthetic`, :mod:`.cli` (``g2g-covis``).
"""
