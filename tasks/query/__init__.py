"""The query path: authorization, retrieval channels, fusion (and the TRACE loop on top)."""
