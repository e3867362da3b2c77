"""The rollout service (`dojo serve`): a trainer submits batches of tasks over HTTP and receives
finished groups of RL samples (token records, rewards, weight versions) as they complete."""
