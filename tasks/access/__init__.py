"""Who may see what: the access policy (decided per access class, applied as a mask or a Lance
filter), the time rule (validity intervals) and the principals. Below ingest, query, ops and the
reading room, which all decide through it."""
