"""Maps: the ``.g2gmap`` artefact relocalization localizes against.

Modules: :mod:`.format` (reading and writing a map file), :mod:`.schema` (the header's keys,
types and ranges), :mod:`.seal` (the header's checksum), :mod:`.windows` (a map's windows and
the window nearest a pose), :mod:`.building` (a map from keyframes) and :mod:`.cli`
(``g2g-map``).
"""
