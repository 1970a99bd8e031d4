"""quantized kernel units."""
