"""layout kernel units."""
