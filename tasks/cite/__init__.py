"""Citations: references to cited documents (references.py) and their export formats (formats.py)."""
