"""The `bouquet-eval` command: its flags, the configuration they make, the run they start."""
