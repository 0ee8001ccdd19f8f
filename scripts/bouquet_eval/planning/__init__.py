"""The plan: what a run will do, worked out from the configuration before any job starts."""
