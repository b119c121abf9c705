"""The AI app marketplace: apps published from trained checkpoints or external endpoints, billed per call."""
