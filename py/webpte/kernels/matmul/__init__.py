"""matmul kernel units."""
