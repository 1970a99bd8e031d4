"""elementwise kernel units."""
