"""The toy generation of the query tests (two tenants, a real LanceDB table), shared here."""
from tests.query.conftest import lance_table, toy_table  # noqa: F401  (fixtures)
