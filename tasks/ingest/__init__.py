"""Units of work of the release pipeline, one module per stage."""
