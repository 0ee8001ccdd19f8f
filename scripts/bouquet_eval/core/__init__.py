"""What every stage leans on: files, languages, configuration values, secrets, devices."""
