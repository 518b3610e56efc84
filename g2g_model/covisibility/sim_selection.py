"""The relocalize node's window selection on simulator scenes (for ``g2g-covis sim-eval``, the
quality test and the probes): traversal 0 of a scene becomes a map, and the node's own
:class:`~g2g_model.localization.window_selector.WindowSelector` scores and picks on it, so the
published window-pick figures measure the shipped code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Sequence, Tuple

import numpy as np
import torch

from g2g_model.estimation.groups import Group
from g2g_model.localization.selector_config import SelectorConfig, SelectorModels
from g2g_model.localization.window_selector import WindowSelector
from g2g_model.maps.format import G2GMap, MapFrame, encode_image

if TYPE_CHECKING:
    from g2g_model.covisibility.sim_data import SceneFrames


def scene_map(frames: "SceneFrames", images: Sequence[np.ndarray]) -> Tuple[G2GMap, np.ndarray]:
    """Traversal 0 of a scene as an in-memory map (what ``g2g-map build`` would store: every
    camera's frames with their poses, images and tokens), and ``[F]`` the map row of each scene
    frame (-1 for frames of other traversals). Camera ``c`` is named ``cam<c>``; a frame's
    stamp is its frame number."""
    rows = np.full(len(frames), -1, dtype=np.int64)
    members = np.flatnonzero(frames.traversal == 0)
    rows[members] = np.arange(len(members))
    map_frames = [MapFrame(camera=f"cam{int(frames.camera[i])}", stamp_ns=int(frames.frame[i]),
                           world_T_cam=frames.world_T_cam[i], intrinsics=frames.intrinsics[i],
                           image=encode_image(images[i]), size_hw=images[i].shape[:2])
                  for i in members]
    return G2GMap(frames=map_frames, backbone=dict(frames.encoder),
                  features=frames.tokens[torch.from_numpy(members)]), rows


def sim_selectors(window: int, embedding=None, image_embedding=None, pair_verifier=None,
                  top_k: int = 8, weight: float = 1.0) -> Dict[str, WindowSelector]:
    """The relocalize node's window selectors (:class:`~g2g_model.localization.
    window_selector.WindowSelector`) that the given models allow, by evaluation name:
    ``descriptor``, ``whitened``, ``embedding``, ``image``, ``combined`` and ``verified``
    (``combined`` re-ranked by ``pair_verifier``: the node's default)."""
    def make(scorer: str, **models) -> WindowSelector:
        return WindowSelector(SelectorConfig(scorer=scorer, window_size=window,
                                             pair_verifier="none"),
                              SelectorModels(top_k=top_k, weight=weight, **models))

    out = {"descriptor": make("descriptor"), "whitened": make("whitened")}
    if embedding is not None:
        out["embedding"] = make("embedding", embedding=embedding)
    if image_embedding is not None:
        out["image"] = make("image", image_embedding=image_embedding)
    if embedding is not None and image_embedding is not None:
        out["combined"] = make("combined", embedding=embedding, image_embedding=image_embedding)
        if pair_verifier is not None:
            out["verified"] = WindowSelector(
                SelectorConfig(scorer="combined", window_size=window),
                SelectorModels(embedding=embedding, image_embedding=image_embedding,
                               pair_verifier=pair_verifier, top_k=top_k, weight=weight))
    return out


def query_group(frames: "SceneFrames", images: Sequence[np.ndarray], q: np.ndarray) -> Group:
    """Frames ``q`` of a scene as a query group (images, intrinsics, poses, frame numbers)."""
    return Group(images=[images[i] for i in q], intrinsics=frames.intrinsics[q],
                 cam_to_world=frames.world_T_cam[q], stamps=list(frames.frame[q]))


def selector_scorer(selector: WindowSelector, frames: "SceneFrames",
                    images: Sequence[np.ndarray], rows: np.ndarray) -> Callable:
    """A prepared selector's frame-pair scores (:meth:`WindowSelector.frame_scores`: what the
    node scores map windows with) as a frame scorer ``(map_indices, query_indices) ->
    [T_map, T_query]`` for :func:`scored_window_queries`; ``rows`` from :func:`scene_map`."""
    def score(m: np.ndarray, q: np.ndarray) -> np.ndarray:
        scores = selector.frame_scores(query_group(frames, images, q), frames.tokens[q])
        return scores[rows[m]]
    return score


def selector_ranking(selector: WindowSelector, frames: "SceneFrames",
                     images: Sequence[np.ndarray], rows: np.ndarray, m: np.ndarray,
                     q: np.ndarray) -> List[Tuple[int, float, float]]:
    """:meth:`WindowSelector.rank` of one query (frames ``q``) restricted to the windows of the
    map frames ``m`` (one camera of traversal 0, the sim-eval protocol), with each window given
    as its start within ``m`` (the selector's choice is first)."""
    prepared = selector.prepared
    start_of = {int(r): i for i, r in enumerate(rows[m])}
    allowed = [int(w[0]) in start_of for w in prepared.windows]
    ranked = selector.rank(query_group(frames, images, q), frames.tokens[q], allowed)
    return [(start_of[int(prepared.windows[i][0])], score, verification)
            for i, score, verification in ranked]
