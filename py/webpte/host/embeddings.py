"""Token embeddings from the int8 table and its per-row scales (computed by the host)."""

from __future__ import annotations

import os

from ..errors import InputError


class EmbeddingTable:
    """`[vocab, dim]` int8 rows times a float32 scale per row.

    The table is memory-mapped, so only the rows looked up are read.
    """

    def __init__(self, table_path: str | os.PathLike, scales_path: str | os.PathLike,
                 dim: int):
        import numpy as np

        size = os.path.getsize(table_path)
        if dim <= 0 or size % dim:
            raise InputError(f"{table_path}: {size} bytes is not a whole number of {dim}-wide "
                             f"int8 rows")
        self.vocab = size // dim
        self.dim = dim
        n_scales = os.path.getsize(scales_path) // 4
        if n_scales != self.vocab or os.path.getsize(scales_path) % 4:
            raise InputError(f"{scales_path}: {n_scales} scales for {self.vocab} table rows")
        self.table = np.memmap(table_path, np.int8, "r", shape=(self.vocab, dim))
        self.scales = np.fromfile(scales_path, np.float32)

    def __call__(self, ids):
        """float32 `[len(ids), dim]` embeddings."""
        import numpy as np

        ids = np.asarray(ids, np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab):
            raise InputError(f"token id out of range 0..{self.vocab - 1}")
        return self.table[ids].astype(np.float32) * self.scales[ids][:, None]


def quantize_table(weights):
    """Rows of a float `[vocab, dim]` table as int8 + per-row scale (symmetric, amax/127)."""
    import numpy as np

    w = np.asarray(weights, np.float32)
    amax = np.abs(w).max(axis=1)
    scales = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales


def splice_rows(embeds, positions, rows):
    """Replace embeds[positions] with `rows` (image embeddings over the <image> rows)."""
    if len(positions) != len(rows):
        raise InputError(f"{len(positions)} <image> tokens in the prompt but {len(rows)} image "
                         f"embedding rows")
    out = embeds.copy()
    out[list(positions)] = rows
    return out
