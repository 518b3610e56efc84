"""Which map window a query window is aligned against: the one implementation.

The relocalize node (through :class:`~g2g_model.localization.relocalizer.Relocalizer`),
``g2g-covis sim-eval`` (:mod:`g2g_model.covisibility.sim_data`) and the end-to-end benchmark
(``benchmarks/covis_end_to_end.py``) all call :class:`WindowSelector`, so a published
window-pick figure measures what the robot runs.

* :meth:`WindowSelector.prepare` describes a map once (its token statistics or whitening, the
  descriptors of every frame, the pair verifier's shrunk frames);
* :meth:`WindowSelector.select` picks a window for a query group: the window nearest to a pose
  hint when one is given and a window lies within ``hint_radius_m``; otherwise the scorer's
  best window (``scorer``, see :data:`.selector_config.WINDOW_SCORERS`), whose ``top_k`` best
  distinct places the pair verifier re-ranks for the embedding scorers.

Its configuration (:class:`~.selector_config.SelectorConfig`) and the models it needs are in
:mod:`.selector_config`.

The frame-pair scorers themselves live in :mod:`g2g_model.covisibility.window_scores` and
:mod:`g2g_model.covisibility`.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch

from g2g_model.estimation.groups import Group
from g2g_model.localization.map_images import MapImages
from g2g_model.maps.windows import map_windows, nearest_window
from g2g_model.maps.format import G2GMap
from g2g_model.localization.selector_config import (
    OVERLAP_SCORERS, SelectorConfig, SelectorModels, load_selector_models,
)
from g2g_model.covisibility.window_scores import (
    MapWhitening, best_window, descriptor_similarity, token_statistics,
)

LOG = logging.getLogger(__name__)

# Scorers that describe the map once when it is prepared.
PREPARED_SCORERS = (*OVERLAP_SCORERS, "whitened")
HOW = {"combined": "token + image covisibility embeddings",
       "embedding": "covisibility embedding", "image": "image covisibility embedding",
       "whitened": "map-whitened similarity", "descriptor": "descriptor similarity",
       "covisibility": "covisibility"}


class Selection(NamedTuple):
    """A chosen map window: its index in the prepared windows, its score (an estimated
    overlap for :data:`OVERLAP_SCORERS` and the decoder, NaN otherwise), and how it was
    chosen (for logs and status); then, for reports: the pair verifier's value (NaN without
    re-ranking), the (map frame, query frame) pairs scored, and the chosen window's frame-pair
    scores ``[W, T_query]`` (None for a pick by the hint)."""

    index: int
    score: float
    how: str
    verification: float = float("nan")
    pairs_scored: int = 0
    block: Optional[np.ndarray] = None


# describe(query_tokens, query_images) -> [T_query, dim] unit descriptors
Describe = Callable[[torch.Tensor, Sequence[np.ndarray]], torch.Tensor]


@dataclass
class PreparedMap:
    """What :meth:`WindowSelector.prepare` keeps of a map (replaced as a whole)."""

    gmap: G2GMap
    windows: List[np.ndarray]
    tokens: Optional[torch.Tensor]        # [F, P, D] float32, or None (no cached features)
    parts: List[Tuple[Describe, torch.Tensor]]  # (describe a query, the map's descriptors)
    verify_images: Optional[torch.Tensor]  # the map's frames shrunk for the pair verifier
    images: MapImages                      # the map's decoded keyframes (cached)


class WindowSelector:
    """Window selection of a named configuration (see the module docstring).

    Args:
        config: the configuration.
        models: its loaded models (:func:`load_selector_models`).
        encode: ``encode(images, intrinsics) -> [T, P, D]`` tokens of query frames (the G2G
            pipeline's ``encode_frames``); needed unless every :meth:`select` passes tokens.
    """

    def __init__(self, config: SelectorConfig, models: SelectorModels,
                 encode: Optional[Callable] = None):
        self.config = config.validate()
        self.models = models
        self.encode = encode
        self.prepared: Optional[PreparedMap] = None

    @classmethod
    def from_config(cls, config: SelectorConfig, pipeline=None, info=LOG.info,
                    warning=LOG.warning) -> "WindowSelector":
        """Load the models of ``config`` (token models checked against ``pipeline``'s
        encoder) and log what was loaded through ``info`` / ``warning``."""
        encoder = pipeline.backbone_id() if pipeline is not None else None
        models, lines = load_selector_models(config, encoder)
        for level, line in lines:
            if level == "warning":
                warning(line)
            else:
                info(line)
        return cls(config, models, pipeline.encode_frames if pipeline is not None else None)

    # ------------------------------------------------------------------ the map
    def prepare(self, gmap: G2GMap, source: str = "map") -> PreparedMap:
        """Describe ``gmap`` once (:meth:`describe_map`) and make it the map :meth:`select`
        searches. Raises ``ValueError`` saying what is wrong; the previously prepared map is
        then kept."""
        self.prepared = self.describe_map(gmap, source)
        return self.prepared

    def describe_map(self, gmap: G2GMap, source: str = "map") -> PreparedMap:
        """What :meth:`select` needs of ``gmap``, without making it the current map. Windows
        are ``window_size`` consecutive frames of every map camera (a place revisited in the
        other direction is seen by another camera of the mapping run)."""
        cfg, models = self.config, self.models
        windows = map_windows(gmap, None, cfg.window_size)
        if not windows:
            raise ValueError(f"{source} has no camera with {cfg.window_size} frames "
                             f"(cameras: {gmap.cameras()})")
        parts = []
        verify_images = None
        if gmap.features is not None and cfg.scorer in PREPARED_SCORERS:
            try:
                if cfg.scorer == "whitened":
                    whiten = MapWhitening.fit(gmap.features).transform
                    parts.append((lambda tokens, images: whiten(tokens), whiten(gmap.features)))
                if cfg.scorer in ("combined", "embedding") and models.embedding is not None:
                    describe_tokens = functools.partial(models.embedding.describe,
                                                        stats=token_statistics(gmap.features))
                    parts.append((lambda tokens, images: describe_tokens(tokens),
                                  describe_tokens(gmap.features)))
            except ValueError as exc:
                raise ValueError(f"{source}: its cached features are unusable: {exc}") from exc
            verifier = models.pair_verifier
            # Writable copies: the embeddings hand them to torch (the cache's are read-only).
            images = ([f.decode() for f in gmap.frames]
                      if cfg.scorer in ("combined", "image") or verifier is not None else None)
            if cfg.scorer in ("combined", "image"):
                image_model = models.image_embedding
                parts.append((lambda tokens, images: image_model.describe(images),
                              image_model.describe(images)))
            verify_images = None if verifier is None else verifier.shrink_all(images)
        tokens = None if gmap.features is None else gmap.features.float()
        return PreparedMap(gmap, windows, tokens, parts, verify_images, MapImages(gmap))

    # ------------------------------------------------------------------ a query
    def frame_scores(self, query: Group, query_tokens: Optional[torch.Tensor] = None,
                     prepared: Optional[PreparedMap] = None) -> np.ndarray:
        """``[F_map, T_query]`` frame-pair scores of the prepared map against ``query`` by the
        configured scorer (not the decoder, which scores per camera inside :meth:`select`)."""
        prepared = prepared or self._prepared()
        if prepared.tokens is None:
            raise ValueError("the map has no cached features; rebuild it with g2g-map build")
        tokens = self._query_tokens(query, query_tokens)
        if prepared.parts:  # map side described at prepare()
            # The embeddings' cosines estimate overlaps: their mean is one too.
            return sum((map_desc @ describe(tokens, query.images).T).numpy()
                       for describe, map_desc in prepared.parts) / len(prepared.parts)
        return descriptor_similarity(prepared.tokens, tokens)

    def select(self, query: Group, hint: Optional[np.ndarray] = None,
               query_tokens: Optional[torch.Tensor] = None,
               allowed: Optional[Sequence[bool]] = None,
               prepared: Optional[PreparedMap] = None) -> Selection:
        """Pick the map window for ``query``.

        Args:
            query: the query frames (images and intrinsics are read).
            hint: ``[4, 4]`` pose of the query's camera in the map frame, or None.
            query_tokens: the query frames' tokens when already encoded (else ``encode``).
            allowed: optional mask over the prepared windows (evaluation protocols).
            prepared: search this map instead of the current one (a caller that took it
                together with other state).
        Raises:
            ValueError: no map prepared, a map without cached features (without a hint), or
                no window above the decoder's threshold.
        """
        prepared = prepared or self._prepared()
        cfg, windows = self.config, prepared.windows
        note = ""
        if hint is not None:
            position = np.asarray(hint)[:3, 3]
            idx = nearest_window(prepared.gmap, windows, position, cfg.hint_radius_m,
                                 direction=np.asarray(hint)[:3, 2])
            if idx is not None:
                return Selection(idx, float("nan"), "pose hint")
            note = (f" (no map window within hint_radius_m={cfg.hint_radius_m} of the hint "
                    f"{position.round(2).tolist()}: whole map searched)")
        if prepared.tokens is None:
            raise ValueError("the map has no cached features; rebuild it with g2g-map build")
        if cfg.scorer == "covisibility":
            return self._select_by_decoder(prepared, query, query_tokens, note)
        scores = self.frame_scores(query, query_tokens, prepared)
        ranked = self._rank(scores, query, allowed, prepared)
        if not ranked:
            raise ValueError("no map window may be picked")
        idx, score, verification = ranked[0]
        how = HOW[cfg.scorer if prepared.parts else "descriptor"]
        if np.isfinite(verification):
            how += f" + pair verifier {verification:.2f}"
        # The embeddings' scores approximate overlaps; the other similarities have no scale.
        overlap = cfg.scorer in OVERLAP_SCORERS and bool(prepared.parts)
        return Selection(idx, score if overlap else float("nan"), how + note, verification,
                         int(scores.size), scores[np.asarray(prepared.windows[idx])])

    def rank(self, query: Group, query_tokens: Optional[torch.Tensor] = None,
             allowed: Optional[Sequence[bool]] = None,
             prepared: Optional[PreparedMap] = None) -> List[Tuple[int, float, float]]:
        """The scorer's choice without a hint, best first, as ``(window index, window score,
        verification)``: with the pair verifier its ``top_k`` best distinct places re-ranked
        (:func:`~g2g_model.covisibility.pair_verifier.verify_windows`), without it the best
        window alone (verification NaN). Empty when ``allowed`` allows none."""
        prepared = prepared or self._prepared()
        return self._rank(self.frame_scores(query, query_tokens, prepared), query, allowed,
                          prepared)

    def _rank(self, scores: np.ndarray, query: Group, allowed, prepared: PreparedMap):
        verifier = self.models.pair_verifier
        if verifier is not None and prepared.verify_images is not None:
            from g2g_model.covisibility.pair_verifier import verify_windows

            return verify_windows(verifier, scores, prepared.windows, prepared.verify_images,
                                  verifier.shrink_all(query.images), self.models.top_k,
                                  self.models.weight, allowed)
        idx, score = best_window(scores, prepared.windows, allowed)
        return [] if idx is None else [(idx, score, float("nan"))]

    def _prepared(self) -> PreparedMap:
        prepared = self.prepared
        if prepared is None:
            raise ValueError("no map prepared")
        return prepared

    def _query_tokens(self, query: Group, tokens: Optional[torch.Tensor]) -> torch.Tensor:
        if tokens is not None:
            return tokens
        if self.encode is None:
            raise ValueError("query tokens are needed (no encoder given)")
        return self.encode(query.images, query.intrinsics)

    def _select_by_decoder(self, prepared: PreparedMap, query: Group,
                           query_tokens: Optional[torch.Tensor], note: str) -> Selection:
        from g2g_model.covisibility.front_end import select_map_windows

        cfg, gmap = self.config, prepared.gmap
        tokens = self._query_tokens(query, query_tokens)
        best, pairs = None, 0
        for cam in gmap.cameras():  # windows are consecutive frames of one camera
            rows = gmap.camera_indices(cam)
            if len(rows) < cfg.window_size:
                continue
            picks, scores = select_map_windows(
                self.models.covisibility, prepared.tokens[torch.from_numpy(rows)], tokens,
                (cfg.window_size, len(query.images)), top_k=1, threshold=cfg.min_overlap_score,
                coarse_stride=cfg.coarse_stride)
            pairs += int(scores.score.any(axis=1).sum()) * len(query.images)
            if picks and (best is None or picks[0].score > best[1]):
                start = picks[0].map_start
                best = (int(rows[start]), float(picks[0].score),
                        scores.score[start:start + cfg.window_size])
        if best is None:
            raise ValueError(f"no map window scores above min_overlap_score="
                             f"{cfg.min_overlap_score}")
        idx = next(i for i, w in enumerate(prepared.windows) if int(w[0]) == best[0])
        return Selection(idx, best[1], "covisibility" + note, pairs_scored=pairs,
                         block=np.asarray(best[2]))
