"""The Megatron family: what the plugins of frameworks built on Megatron-LM share: its flags (flags.py) and its
log's iteration lines (log.py)."""
