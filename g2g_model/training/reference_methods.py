"""The references every learned method must beat, scored by ``g2g-eval`` like any method.

* ``identity`` ("no motion"): B0 at A0. A method that does not beat it does not use the images.
* ``constant_step``: B0 one fixed translation from A0, the per-axis median of the true
  translations of the evaluated pairs themselves (in A0's camera frame), chosen in hindsight:
  the best guess of a model that has learnt only how far and which way the data's platform
  usually moves, and nothing from the images. On forward driving it is far better than "no
  motion" (a car mostly drives ahead), so a model's gain over "no motion" alone can be a prior;
  a model that sees the motion beats this one too. The rotation is the identity, as for "no
  motion".
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


class IdentityMethod:
    """``predict(poses_a, poses_b)``: T_{A0<-Bj} = T_{B0<-Bj} (B0 at A0), A poses as given."""

    image_size = (1, 1)

    def predict(self, poses_a: torch.Tensor, poses_b: torch.Tensor):
        return poses_a.double().numpy(), poses_b.double().numpy()


class ConstantStepMethod(IdentityMethod):
    """``predict(poses_a, poses_b)``: T_{A0<-Bj} = C T_{B0<-Bj}, C the translation ``step``
    (see :func:`hindsight_step`)."""

    def __init__(self, step: Sequence[float]) -> None:
        self.step = np.asarray(step, float).reshape(3)

    def predict(self, poses_a: torch.Tensor, poses_b: torch.Tensor):
        pred_a, pred_b = super().predict(poses_a, poses_b)
        shift = np.eye(4)
        shift[:3, 3] = self.step
        return pred_a, shift[None] @ pred_b


def hindsight_step(a0_T_b0: Sequence[np.ndarray]) -> np.ndarray:
    """The per-axis median of the translations of the true ``[4, 4]`` T_{A0<-B0}: the constant
    translation with the least summed absolute error per axis on those pairs."""
    poses = np.asarray(a0_T_b0, float)
    if not len(poses):
        raise ValueError("no pairs to take a constant step from")
    return np.median(poses[:, :3, 3], axis=0)
