"""The tiled online-softmax attention kernel shared by the attention units, and its reference.

One workgroup per query row (b, h, s) walks that row's keys in tiles of `WORKGROUP`: each
invocation scores one key (a sequential f32 dot over D, times the scale, plus the additive
mask), the tile's max and sum of exp are tree-reduced in workgroup memory, and the running
max / sum / output rows are rescaled by `exp(m_old - m_new)` (flash attention's online
softmax), so any key count and any head dim run in 16 KiB of workgroup memory. Query head
h reads kv head `h // (Hq / Hkv)` (grouped-query attention). `tiled_attention_reference`
does the same f32 arithmetic in the same order with numpy, vectorised over rows.

Flash-decoding variant: with few query rows (decode) and many keys, one workgroup per row
leaves a GPU mostly idle, so the keys are split into chunks of `chunk` keys, one workgroup
per (row, chunk) writes its partial (unnormalised output, max, sum) and a second kernel
merges them (`split_attention_reference`). The planner hint `attn_kv_chunk:N` among the
lowering's features asks for it (GPU adapters; CPU adapters run enough rows already).

Serial variant (`attention:serial`, CPU adapters): one invocation per query row (and split)
walks the same tiles of WORKGROUP keys with no workgroup memory and no barrier, since a CPU
adapter runs each barrier as a switch between the workgroup's SIMD batches. Its arithmetic
is the tiled kernel's but for each tile's sum of exp, taken in key order instead of the
halving tree (`serial=True` in the references). llvmpipe (lavapipe) ends every loop of an
invocation, silently, once its loops have run LOOP_BUDGET iterations in all, so a serial
invocation walks at most `serial_max_keys(D)` keys: longer rows are split over the keys as
above (`serial_chunk`), and a head dim whose first tile alone passes the budget takes the tiled
kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import PlanError
from .._np import np
from ..common import hinted_variant

WORKGROUP = 64      # keys per tile = invocations per query row's workgroup
MAX_GROUPS = 65535  # query rows beyond this fold into workgroup y
NEG = -3.0e38       # the kernel's NEG: below any score (a float: numpy may be absent)
KV_CHUNK_HINT = "attn_kv_chunk:"   # planner hint: split the keys into chunks of N
MAX_SPLITS = 64
ATTENTION_HINT = "attention:"      # planner hint: the kernel variant, "tiled" or "serial"
ATTENTION_VARIANTS = ("tiled", "serial")
SERIAL_WORKGROUP = 8               # rows per workgroup of the serial kernel (one SIMD batch)
# llvmpipe's loop limiter (gallivm LP_MAX_TGSI_LOOP_ITERATIONS): one counter per invocation,
# shared by all its loops; past it every loop ends after one more pass.
LOOP_BUDGET = 65535


@dataclass(frozen=True)
class Layout:
    """Where a query row's operands live, as element strides (D is always contiguous).

    Query row qi (memory order of q and out) is (b, h, s) with `s = (qi // s_div) % seq`,
    `h = (qi // h_div) % hq`, `b = qi // (hq * seq)`; key/value c of kv head g in batch b
    starts at `b*kv_b + g*kv_h + c*kv_c`, the mask entry at `b*m_b + h*m_h + s*m_s + c*m_c`
    (a zero stride broadcasts). `keys`: "fixed" (skv keys), "cache" (the cache rows up to
    input_pos + seq) or "causal" (up to input_pos + s + 1); the cache forms read input_pos
    from a binding and clamp it into `ctx` rows.
    """

    batch: int
    hq: int
    hkv: int
    seq: int
    d: int
    s_div: int
    h_div: int
    kv_b: int
    kv_h: int
    kv_c: int
    keys: str
    skv: int = 0
    ctx: int = 0
    mask: tuple[int, int, int, int] | None = None


def fits_workgroup_memory(d: int) -> bool:
    """The q row and the two tile arrays in WebGPU's guaranteed 16 KiB of workgroup memory."""
    return 4 * (d + 2 * WORKGROUP + 1) <= 16384


def kv_chunk(features, n_keys: int) -> int:
    """Keys per split the features' hint asks for (a multiple of WORKGROUP, at most
    MAX_SPLITS splits of `n_keys`), or 0: no split (no hint, or one chunk holds every key)."""
    hints = [f[len(KV_CHUNK_HINT):] for f in sorted(features) if f.startswith(KV_CHUNK_HINT)]
    if not hints or not hints[-1].isdigit() or int(hints[-1]) <= 0:
        return 0
    chunk = -(-int(hints[-1]) // WORKGROUP) * WORKGROUP
    chunk = max(chunk, -(-n_keys // (MAX_SPLITS * WORKGROUP)) * WORKGROUP)
    return chunk if chunk < n_keys else 0


def attention_variant(features, d: int | None = None) -> str:
    """The kernel variant the lowering's features ask for (the last hint wins; tiled); tiled
    for a head dim `d` whose serial invocation passes LOOP_BUDGET within one tile."""
    name = hinted_variant(features, ATTENTION_HINT, ATTENTION_VARIANTS, "tiled", "attention")
    return "tiled" if d is not None and serial_max_keys(d) < WORKGROUP else name


def serial_loop_iterations(d: int, keys: int) -> int:
    """Loop iterations (passes and exit tests) of one serial invocation over `keys` keys,
    every loop counted (llvmpipe unrolls only short ones): the q, output and cache-copy loops,
    per tile its step, exit tests and the value update's D loop, per key the score's D loop
    and its passes of the score, exp and value loops."""
    tiles = -(-keys // WORKGROUP)
    return 3 * (d + 1) + 1 + tiles * (2 * d + 4) + keys * (2 * d + 3)


def serial_max_keys(d: int) -> int:
    """The most keys (whole tiles) one serial invocation walks within LOOP_BUDGET."""
    per_tile = serial_loop_iterations(d, WORKGROUP) - serial_loop_iterations(d, 0)
    return max(0, (LOOP_BUDGET - serial_loop_iterations(d, 0)) // per_tile) * WORKGROUP


def serial_chunk(d: int, n_keys: int, chunk: int) -> int:
    """Keys per split of the serial kernel: `chunk` (0: no split), or where an invocation
    would walk more than `serial_max_keys(d)` keys, the fewest splits of whole tiles that
    stay within it (as even as tiles allow)."""
    most = serial_max_keys(d)
    if (chunk or n_keys) <= most:
        return chunk
    splits = -(-n_keys // most)
    return -(-n_keys // (splits * WORKGROUP)) * WORKGROUP


def lower_attention(L, lay: Layout, scale: float, q: int, k: int, v: int, out: int,
                    start: int | None = None, mask: int | None = None,
                    new_kv: tuple[int, int] | None = None) -> None:
    """The kernel's dispatch (and the merge's, split); `q`, `k`, `v`, `out`, `start`,
    `mask` are buffers. `new_kv`: the window's new k, v rows ([S, Hkv, D]), for the serial
    kernel to store at cache rows start + s itself (the caller plans no cache write)."""
    rows = lay.batch * lay.hq * lay.seq
    n_keys = lay.skv if lay.keys == "fixed" else lay.ctx
    serial = attention_variant(L.features, lay.d) == "serial"
    chunk = kv_chunk(L.features, n_keys)
    if serial:
        chunk = serial_chunk(lay.d, n_keys, chunk)
    splits = -(-n_keys // chunk) if chunk else 1
    m_b, m_h, m_s, m_c = lay.mask or (0, 0, 0, 0)
    if new_kv is not None and (not serial or lay.keys == "fixed" or lay.batch != 1):
        raise PlanError("the cache write folds into the serial kernel of a one-batch cache")
    wgs = rows * splits
    if serial:
        grid, row = L.grid(wgs, SERIAL_WORKGROUP)
        shape = {"workgroup": SERIAL_WORKGROUP, "tile": WORKGROUP, "row": row}
    else:
        grid = (min(wgs, MAX_GROUPS), -(-wgs // MAX_GROUPS), 1)
        shape = {"workgroup": WORKGROUP, "d_per_thread": -(-lay.d // WORKGROUP),
                 "group_row": MAX_GROUPS}
    kernel = L.kernel(
        "attention/sdpa_serial" if serial else "attention/sdpa_attention", rows=rows,
        batch=lay.batch, hq=lay.hq, hkv=lay.hkv, group=lay.hq // lay.hkv, seq=lay.seq, d=lay.d,
        s_div=lay.s_div, h_div=lay.h_div,
        kv_b=lay.kv_b, kv_h=lay.kv_h, kv_c=lay.kv_c, keys=lay.keys, skv=lay.skv, ctx=lay.ctx,
        masked=lay.mask is not None, m_b=m_b, m_h=m_h, m_s=m_s, m_c=m_c,
        scale=scale, splits=splits, chunk=chunk, fold=new_kv is not None, **shape)
    part = L.scratch(4 * rows * splits * (lay.d + 2), "attention partials") if chunk else out
    bindings = [q, k, v] + ([start] if lay.keys != "fixed" else []) + \
        ([mask] if lay.mask is not None else []) + list(new_kv or ()) + [part]
    L.dispatch(kernel, bindings, grid)
    if chunk:
        groups, row = L.grid(rows * lay.d)
        merge = L.kernel("attention/sdpa_combine", rows=rows, d=lay.d, splits=splits,
                         workgroup=256, row=row)
        L.dispatch(merge, [part, out], groups)


def _tree_sum(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis (WORKGROUP long) as the kernel's halving reduction adds."""
    half = x.shape[-1] // 2
    while half:
        x = x[..., :half] + x[..., half:2 * half]
        half //= 2
    return x[..., 0]


def _serial_sum(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis in index order, as the serial kernel adds."""
    total = np.zeros(x.shape[:-1], np.float32)
    for r in range(x.shape[-1]):
        total = total + x[..., r]
    return total


def _per_kv_head(q, k, v, scale, n_keys, mask, rows_fn) -> np.ndarray:
    """Attention of q [B,Hq,S,D] over k, v [B,Hkv,N,D], one kv head's query rows at a time:
    `rows_fn(qr, kk, vv, scale, count, mr, col)` gives those rows' output."""
    b, hq, s, d = q.shape
    hkv, n = k.shape[1], k.shape[2]
    group = hq // hkv
    scale = np.float32(scale)
    if mask is not None:
        mask = np.broadcast_to(mask.astype(np.float32), (b, hq, s, n))
    out = np.empty(q.shape, np.float32)
    col = np.arange(WORKGROUP)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for bi in range(b):
            for g in range(hkv):
                heads = slice(g * group, (g + 1) * group)
                qr = q[bi, heads].reshape(group * s, d).astype(np.float32)  # (rows, D)
                count = np.tile(n_keys, group)[:, None]                      # (rows, 1)
                mr = None if mask is None else mask[bi, heads].reshape(group * s, n)
                kk, vv = k[bi, g].astype(np.float32), v[bi, g].astype(np.float32)
                out[bi, heads] = rows_fn(qr, kk, vv, scale, count, mr, col).reshape(group, s, d)
    return out


def tiled_attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float,
                              n_keys: np.ndarray, mask: np.ndarray | None = None,
                              serial: bool = False) -> np.ndarray:
    """The kernel's arithmetic: q [B,Hq,S,D] over k, v [B,Hkv,N,D] (f32), query row s seeing
    keys [0, n_keys[s]) (n_keys >= 1, <= N), plus `mask` broadcast to [B,Hq,S,N];
    `serial`: the serial kernel's (each tile's sum in key order)."""
    def rows(*a):
        return _rows(*a, serial=serial)

    return _per_kv_head(q, k, v, scale, n_keys, mask, rows)


def split_attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float,
                              n_keys: np.ndarray, chunk: int,
                              mask: np.ndarray | None = None,
                              serial: bool = False) -> np.ndarray:
    """The flash-decoding variant's arithmetic: `tiled_attention_reference`'s per chunk of
    `chunk` keys, then the merge in split order (as attention/sdpa_combine)."""
    def split_rows(qr, kk, vv, scale, count, mr, col):
        parts = [_rows(qr, kk, vv, scale, np.minimum(count, lo + chunk), mr, col, lo=lo,
                       normalise=False, serial=serial) for lo in range(0, kk.shape[0], chunk)]
        big = parts[0][1]
        for _, m_i, _ in parts[1:]:
            big = np.maximum(big, m_i)
        num = np.zeros(qr.shape, np.float32)
        den = np.zeros((qr.shape[0], 1), np.float32)
        for acc, m_i, l_i in parts:
            w = np.exp(m_i - big)
            num = num + acc * w
            den = den + l_i * w
        return num / den

    return _per_kv_head(q, k, v, scale, n_keys, mask, split_rows)


def _rows(qr, kk, vv, scale, count, mr, col, lo: int = 0, normalise: bool = True,
          serial: bool = False):
    """Rows over keys [lo, count): the output (normalised) or (acc, max, sum)."""
    rows, d = qr.shape
    neg = np.float32(NEG)
    m = np.full((rows, 1), neg, np.float32)
    l_sum = np.zeros((rows, 1), np.float32)
    acc = np.zeros((rows, d), np.float32)
    for t0 in range(lo, int(count.max()), WORKGROUP):
        keys = np.minimum(t0 + col, kk.shape[0] - 1)       # (W,) clamped; invalid ones unused
        valid = (t0 + col)[None, :] < count                 # (rows, W)
        dot = np.zeros((rows, WORKGROUP), np.float32)
        for j in range(d):                                  # sequential over D, like the kernel
            dot += qr[:, j:j + 1] * kk[keys, j][None, :]
        score = dot * scale
        if mr is not None:
            score = score + mr[:, keys]
        score = np.where(valid, score, neg)
        m_new = np.maximum(m, score.max(axis=1, keepdims=True))
        p = np.where(valid, np.exp(score - m_new), np.float32(0))
        alpha = np.exp(m - m_new)
        l_sum = l_sum * alpha + (_serial_sum(p) if serial else _tree_sum(p))[:, None]
        m = m_new
        a = np.zeros((rows, d), np.float32)
        for r in range(min(WORKGROUP, kk.shape[0] - t0)):   # sequential over the tile's keys
            a += p[:, r:r + 1] * vv[t0 + r][None, :]
        acc = acc * alpha + a
    return acc / l_sum if normalise else (acc, m, l_sum)
