"""reduce kernel units."""
