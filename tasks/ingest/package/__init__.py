"""Issue packages of digitised newspapers (METS + ALTO): found, verified and read into articles."""
