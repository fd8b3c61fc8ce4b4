"""The only code that knows how the warehouse and manifests are laid out on disk."""
