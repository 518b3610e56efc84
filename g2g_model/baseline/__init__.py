"""Non-learned baselines with the same predict(group_a, group_b) idea as the G2G model."""
