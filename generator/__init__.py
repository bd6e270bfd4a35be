"""gen-launch: turn a short job spec into launch files for LLM training on Ascend NPU clusters."""

__version__ = "0.1.0"
