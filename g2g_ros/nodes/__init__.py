"""rclpy nodes, one per file, each with a console-script ``main(args=None)``."""
