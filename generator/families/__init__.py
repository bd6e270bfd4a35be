"""What the plugins of one family of frameworks share (rl: the RL frameworks), so a second framework of a family
states only its own keys, files and checks."""
