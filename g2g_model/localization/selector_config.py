"""What the map-window selection is configured with (the relocalize node's ``window_scorer``
and ``covis_*`` parameters) and loading the models a configuration needs;
:mod:`.window_selector` selects with them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

WINDOW_SCORERS = ("combined", "embedding", "image", "whitened", "covisibility", "descriptor")
# Scorers whose window score is an estimated overlap in [0, 1] (min_overlap_score applies).
OVERLAP_SCORERS = ("combined", "embedding", "image")


@dataclass
class SelectorConfig:
    """Named configuration of a :class:`~g2g_model.localization.window_selector.WindowSelector`
    (the relocalize node's parameters).

    Attributes:
        scorer: one of :data:`WINDOW_SCORERS` (``window_scorer``).
        embedding, image_embedding, covisibility: model files (``covis_embedding``,
            ``covis_image_embedding``, ``covis_checkpoint``); empty = the shipped default.
        pair_verifier: re-ranking model (``covis_pair_verifier``); empty = the shipped default,
            ``"none"`` = no re-ranking.
        top_k, verifier_weight: re-ranking settings; None = those stored in the verifier file.
        window_size: map frames per window (consecutive frames of one camera).
        hint_radius_m: a pose hint picks the nearest window within this radius.
        min_overlap_score: the covisibility decoder's threshold.
        coarse_stride: the covisibility decoder scores every k-th map frame first.
    """

    scorer: str = "combined"
    embedding: str = ""
    image_embedding: str = ""
    pair_verifier: str = ""
    covisibility: str = ""
    top_k: Optional[int] = None
    verifier_weight: Optional[float] = None
    window_size: int = 5
    hint_radius_m: float = 5.0
    min_overlap_score: float = 0.0
    coarse_stride: int = 1

    def validate(self) -> "SelectorConfig":
        if self.scorer not in WINDOW_SCORERS:
            raise ValueError(f"window_scorer must be one of {WINDOW_SCORERS}, "
                             f"got {self.scorer!r}")
        if self.window_size < 1:
            raise ValueError(f"window_size must be >= 1, got {self.window_size}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.verifier_weight is not None and not self.verifier_weight >= 0:
            raise ValueError(f"verifier weight must be >= 0, got {self.verifier_weight}")
        return self

    @property
    def reranks(self) -> bool:
        return self.scorer in OVERLAP_SCORERS and self.pair_verifier != "none"


@dataclass
class SelectorModels:
    """The loaded models a configuration needs (None where it needs none)."""

    embedding: object = None
    image_embedding: object = None
    covisibility: object = None
    pair_verifier: object = None
    top_k: int = 8
    weight: float = 1.0


def load_selector_models(config: SelectorConfig, encoder: Optional[dict] = None
                         ) -> tuple:
    """``(SelectorModels, [(level "info" or "warning", log line)])`` for ``config``;
    ``ValueError`` (or the loaders' ``CheckpointError``) when a model it needs is missing or
    does not fit ``encoder`` (the G2G backbone id whose tokens the token models read)."""
    from g2g_model.assets import default_checkpoint

    config.validate()
    models, lines = SelectorModels(), []

    def path_of(given: str, task: str, option: str) -> str:
        path = given or default_checkpoint(task)
        if not path or path == "none":
            raise ValueError(f"window_scorer={config.scorer} needs {option}, and none is "
                             "shipped or given")
        return str(path)

    if config.scorer == "covisibility":
        from g2g_model.covisibility.checkpoint import load_checkpoint

        path = path_of(config.covisibility, "covisibility",
                       "a covisibility checkpoint (covis_checkpoint)")
        models.covisibility = load_checkpoint(path, expect_encoder=encoder)[0].eval()
        lines.append(("info", f"covisibility front-end: {path}"))
    if config.scorer in ("combined", "embedding"):
        from g2g_model.covisibility.embedding import load_embedding

        from g2g_model.covisibility.checkpoint import EncoderMismatch

        path = path_of(config.embedding, "covisibility_embedding",
                       "a covisibility embedding (covis_embedding)")
        try:
            models.embedding = load_embedding(path, expect_encoder=encoder)[0]
            lines.append(("info", f"window scorer: covisibility embedding {path}"))
        except EncoderMismatch as exc:
            if config.scorer != "combined" or config.embedding:
                raise  # asked for by name: its mismatch is an error
            # The shipped token embedding reads the compact backbone's tokens; with another
            # backbone (e.g. the paper's MapAnything) "combined" scores with the image alone.
            lines.append(("warning", f"{exc}: window_scorer=combined uses the image "
                          "covisibility embedding alone"))
    if config.scorer in ("combined", "image"):
        from g2g_model.covisibility.image_embedding import load_image_embedding

        path = path_of(config.image_embedding, "covisibility_image_embedding",
                       "an image covisibility embedding (covis_image_embedding)")
        models.image_embedding = load_image_embedding(path)[0]
        lines.append(("info", f"window scorer: image covisibility embedding {path}"))
    if config.reranks:
        from g2g_model.covisibility.pair_verifier import load_pair_verifier

        path = config.pair_verifier or default_checkpoint("covisibility_pair_verifier")
        if not path:
            lines.append(("warning", "no pair verifier shipped or given: map windows are not "
                          "re-ranked"))
        else:
            models.pair_verifier, header = load_pair_verifier(path)
            models.top_k = int(header["top_k"] if config.top_k is None else config.top_k)
            models.weight = float(header["weight"] if config.verifier_weight is None
                                  else config.verifier_weight)
            lines.append(("info", f"window re-ranking: pair verifier {path} (top "
                                  f"{models.top_k}, weight {models.weight})"))
    return models, lines
