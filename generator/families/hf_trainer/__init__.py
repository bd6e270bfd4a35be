"""The HuggingFace-trainer family: what the plugins of frameworks that train the HuggingFace code through
transformers' Trainer and DeepSpeed share: the ZeRO search (zero.py)."""
