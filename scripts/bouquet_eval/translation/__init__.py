"""Translating directions with a translator: resumable outputs, one stream per job, the API."""
