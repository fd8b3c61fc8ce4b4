"""Harvesting Gallica's documented services into package folders the release reads."""
