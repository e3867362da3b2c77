"""swedojo: environments, agents, rewards and RL trajectories in one pipeline."""

__version__ = "0.1.0"
