"""What the plugins of one family of frameworks share (rl: the RL frameworks; megatron: those built on Megatron-LM;
hf_trainer: those training the HuggingFace code through transformers' Trainer), so a second framework of a family
states only its own keys, files and checks."""
