"""attention kernel units."""
