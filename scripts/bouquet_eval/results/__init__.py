"""What a run's scores become: aggregates, the leaderboard, the report and its views, checks."""
