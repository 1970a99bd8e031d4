"""Image preprocessing for the SmolVLM vision program: one 512x512 global image."""

from __future__ import annotations

import io
import os

from ..errors import InputError

IMAGE_SIZE = 512


def preprocess_image(source, size: int | tuple[int, int] = IMAGE_SIZE):
    """A path, bytes or PIL image -> float32 `[1, 3, H, W]`, `(x/255 - 0.5)/0.5`.

    Decoded with Pillow, converted to RGB, resized to `size` (H, W; one int: square) with
    Lanczos unless it already has that size.
    """
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    try:
        if isinstance(source, Image.Image):
            img = source
        elif isinstance(source, (bytes, bytearray)):
            img = Image.open(io.BytesIO(source))
        elif isinstance(source, (str, os.PathLike)):
            img = Image.open(source)
        else:
            raise InputError(f"cannot read an image from {type(source).__name__}")
        img = img.convert("RGB")
    except FileNotFoundError:
        raise
    except (UnidentifiedImageError, OSError) as e:
        raise InputError(f"not a readable image: {e}") from e
    height, width = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
    if img.size != (width, height):
        img = img.resize((width, height), Image.Resampling.LANCZOS)
    x = np.asarray(img, np.float32)                       # (size, size, 3)
    x = (x / 255.0 - 0.5) / 0.5
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])  # (1, 3, size, size)
