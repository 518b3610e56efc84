"""The rig's other cameras at the query stamps, for geometric verification.

G2G relocalizes with one camera's window (``reloc_camera``), but a pose solved from every
camera of the rig at those instants is far better constrained: the cameras look in different
directions and add 4-5x the correspondences (docs/VERIFICATION.md). :class:`RigViews` keeps the
latest images of the other cameras, keyed by stamp and bounded; :func:`rig_group` builds the
group a verifier gets (the relocalization camera's frames first, then the other views whose
stamps are in the window), and :func:`map_rig_window` does the same for a map window.
"""

from __future__ import annotations

import collections
import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from g2g_model.estimation.groups import Group
from g2g_model.maps.format import G2GMap


class RigView:
    """One other camera's image at one instant: ``camera``, ``reloc_T_cam`` ``[4, 4]`` (its
    pose in the relocalization camera's frame) and its RGB ``uint8 [H, W, 3]`` image with its
    ``[3, 3]`` K, given at once or made by ``convert() -> (image, K)`` the first time a group
    uses the view (:meth:`deferred`): a node keeps the message and decodes on its worker only
    the views a localization reads, not every image the cameras send."""

    def __init__(self, camera: str, image: Optional[np.ndarray],
                 intrinsics: Optional[np.ndarray], reloc_T_cam: np.ndarray,
                 convert: Optional[Callable[[], Tuple[np.ndarray, np.ndarray]]] = None):
        self.camera, self.reloc_T_cam = camera, np.asarray(reloc_T_cam, float)
        self._image, self._intrinsics, self._convert = image, intrinsics, convert
        self._error: Optional[str] = None
        self._lock = threading.Lock()

    @classmethod
    def deferred(cls, camera: str, convert: Callable[[], Tuple[np.ndarray, np.ndarray]],
                 reloc_T_cam: np.ndarray) -> "RigView":
        """A view whose image ``convert()`` makes on first use (``ValueError``: left out)."""
        return cls(camera, None, None, reloc_T_cam, convert)

    def resolve(self) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """``(image, K)``, converted once; None when the conversion refused the image (its
        ``ValueError`` is what ``convert`` reported; the view stays left out)."""
        with self._lock:
            if self._image is None and self._error is None and self._convert is not None:
                try:
                    image, k = self._convert()
                    self._image, self._intrinsics = image, np.asarray(k, float)
                except ValueError as exc:
                    self._error = str(exc)
                self._convert = None  # the message is released either way
            if self._image is None:
                return None
            return self._image, self._intrinsics

    @property
    def image(self) -> Optional[np.ndarray]:
        got = self.resolve()
        return None if got is None else got[0]

    @property
    def intrinsics(self) -> Optional[np.ndarray]:
        got = self.resolve()
        return None if got is None else got[1]


class RigViews:
    """Images of the rig's other cameras by stamp: those of the query window's instants
    (:meth:`retain`) and at most ``max_stamps`` newer ones not yet buffered, so the memory is
    bounded by (W + ``max_stamps``) x cameras images whatever the robot does."""

    def __init__(self, max_stamps: int = 16):
        self.max_stamps = max_stamps
        self._views: "collections.OrderedDict[int, Dict[str, RigView]]" = \
            collections.OrderedDict()
        self._lock = threading.Lock()

    def add(self, stamp_ns: int, view: RigView) -> None:
        with self._lock:
            self._views.setdefault(int(stamp_ns), {})[view.camera] = view
            while len(self._views) > self.max_stamps:
                self._views.popitem(last=False)

    def retain(self, window_stamps: Sequence[int]) -> None:
        """Keep the views of ``window_stamps`` (the query window) and of newer stamps; drop the
        rest (instants that left the window or were never buffered)."""
        keep = {int(s) for s in window_stamps}
        newest = max(keep) if keep else None
        with self._lock:
            for stamp in [s for s in self._views if s not in keep
                          and (newest is None or s < newest)]:
                del self._views[stamp]

    def at(self, stamp_ns: int) -> List[RigView]:
        with self._lock:
            return list(self._views.get(int(stamp_ns), {}).values())

    def clear(self) -> None:
        with self._lock:
            self._views.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._views)


def rig_group(query: Group, views: Optional[RigViews]) -> Group:
    """The query group plus every stored view at its stamps (odometry poses through each view's
    extrinsics relative to the relocalization camera; each view carries its stamp). Without
    views: the query itself."""
    if views is None or query.stamps is None:
        return query
    images, ks, poses = list(query.images), list(np.asarray(query.intrinsics)), \
        list(np.asarray(query.cam_to_world))
    stamps = [int(s) for s in query.stamps]
    if np.asarray(query.intrinsics).ndim == 2:
        ks = [np.asarray(query.intrinsics)] * len(images)
    for stamp, odom_T_reloc in zip(query.stamps, np.asarray(query.cam_to_world)):
        for view in views.at(stamp):
            got = view.resolve()
            if got is None:  # refused at conversion (reported by its converter)
                continue
            images.append(got[0])
            ks.append(got[1])
            poses.append(odom_T_reloc @ view.reloc_T_cam)
            stamps.append(int(stamp))
    if len(images) == len(query.images):
        return query
    return Group(images=images, intrinsics=np.stack(ks), cam_to_world=np.stack(poses),
                 stamps=stamps)


def map_rig_window(gmap: G2GMap, window: Sequence[int], images=None) -> Group:
    """A map window's frames followed by every other map frame taken within the window's time
    span (the other cameras of the mapping rig; each camera keeps its own keyframes, so their
    stamps need not coincide). ``images``: the map's decoded images
    (:class:`~g2g_model.localization.map_images.MapImages`; default: decoded here)."""
    first = [int(i) for i in window]
    stamps = [gmap.frames[i].stamp_ns for i in first]
    lo, hi = min(stamps), max(stamps)
    taken = set(first)
    rest = [i for i, f in enumerate(gmap.frames) if lo <= f.stamp_ns <= hi and i not in taken]
    frames = [gmap.frames[i] for i in first + rest]
    decoded = (images.images(first + rest) if images is not None
               else [f.decode() for f in frames])
    return Group(images=decoded,
                 intrinsics=np.stack([f.intrinsics for f in frames]),
                 cam_to_world=np.stack([f.world_T_cam for f in frames]),
                 stamps=[f.stamp_ns for f in frames])
