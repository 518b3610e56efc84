"""Camera models: lens distortion and its rectification to the pinhole cameras the model and
the verifiers use (:mod:`g2g_model.cameras.lens`)."""
