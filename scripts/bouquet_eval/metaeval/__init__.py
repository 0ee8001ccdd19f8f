"""Meta-evaluation: how well each metric agrees with human judgements, per direction."""
