"""Stand-in for torchaudio in the execution tier: LLaMA-Factory 0.9.5 imports it at import time
(data/mm_plugin.py l. 30) but uses it only for audio, and torchaudio has no CPU build for torch 2.13."""
