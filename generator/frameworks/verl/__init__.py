"""verl 0.7.0 (GRPO, DAPO, PPO): its own config checks so far (checks.py); the plugin itself is not written yet, so
no frameworks.yaml row names this package."""
