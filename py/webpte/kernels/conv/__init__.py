"""conv kernel units."""
