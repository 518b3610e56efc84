"""ROS 2 nodes, tools and building blocks around g2g_model."""
