"""The query path: retrieval channels, fusion (and the TRACE loop on top), behind the access
policy of tasks/access."""
