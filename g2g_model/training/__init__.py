"""Training of the G2G models: datasets over the dataset format, the overlap curriculum, the
training loop with resume and DDP (``g2g-train``), and evaluation (``g2g-eval``)."""
