"""The indexes of a generation, below ingest (which builds them) and query (which reads them): text analysis, lexical postings, the vector index."""
