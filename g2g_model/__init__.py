"""G2G: group-to-group pose estimation (pure Python / PyTorch, no ROS imports)."""

__version__ = "0.1.0"
