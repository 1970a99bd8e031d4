"""expand_copy, repeat, flip, constant_pad_nd, pixel_shuffle, pixel_unshuffle: one gather
each, the op's whole meaning being its map (kernels/layout/gather.py).

expand: broadcast dims read with stride 0. repeat: each output dim n*r viewed as (r, n),
the r axis with stride 0. flip: negative strides from the dim's last element.
constant_pad_nd: bounded axes (negative pads crop). pixel_(un)shuffle: the output viewed
as the permuted sub-dims of the input.
"""

from __future__ import annotations

from ...errors import PlanError
from .._np import np
from ..common import contiguous_strides, norm_dim
from ..registry import OpUnit
from .gather import Axis, GatherMap, computed, emit_gather, pad_axis, pad_value, store

_EXPAND = "aten.expand_copy.default"
_REPEAT = "aten.repeat.default"
_FLIP = "aten.flip.default"
_PAD = "aten.constant_pad_nd.default"
_SHUFFLE = "aten.pixel_shuffle.default"
_UNSHUFFLE = "aten.pixel_unshuffle.default"


def _fail(A, why: str) -> PlanError:
    return PlanError(f"{A.op_name}: {why}")


def _expand(A, dims, sizes) -> tuple[GatherMap, tuple[int, ...]]:
    if len(sizes) < len(dims):
        raise _fail(A, f"cannot expand {list(dims)} to fewer dims {list(sizes)}")
    lead = len(sizes) - len(dims)
    strides = contiguous_strides(dims)
    axes, out = [Axis(s, 0) for s in sizes[:lead]], list(sizes[:lead])
    if any(s < 0 for s in out):
        raise _fail(A, f"size -1 is not allowed for the new leading dims of {list(sizes)}")
    for n, s, want in zip(dims, strides, sizes[lead:]):
        if want == -1 or want == n:
            axes.append(Axis(n, s))
            out.append(n)
        elif n == 1 and want >= 0:
            axes.append(Axis(want, 0))
            out.append(want)
        else:
            raise _fail(A, f"cannot expand {list(dims)} to {list(sizes)}")
    return GatherMap(tuple(axes)), tuple(out)


def _repeat(A, dims, reps) -> tuple[GatherMap, tuple[int, ...]]:
    if len(reps) < len(dims) or any(r < 0 for r in reps):
        raise _fail(A, f"repeats {list(reps)} do not fit dims {list(dims)}")
    dims = (1,) * (len(reps) - len(dims)) + tuple(dims)
    axes: list[Axis] = []
    for r, n, s in zip(reps, dims, contiguous_strides(dims)):
        axes += [Axis(r, 0), Axis(n, s)]
    return GatherMap(tuple(axes)), tuple(r * n for r, n in zip(reps, dims))


def _flip(A, dims, flips) -> tuple[GatherMap, tuple[int, ...]]:
    flipped = {norm_dim(d, len(dims), A.op_name) for d in flips}
    if len(flipped) != len(flips):
        raise _fail(A, f"dims {list(flips)} repeat a dim")
    axes, offset = [], 0
    for d, (n, s) in enumerate(zip(dims, contiguous_strides(dims))):
        if d in flipped:
            axes.append(Axis(n, -s))
            offset += (n - 1) * s
        else:
            axes.append(Axis(n, s))
    return GatherMap(tuple(axes), offset), tuple(dims)


def _pad_pairs(A, dims, pads) -> list[tuple[int, int]]:
    """(before, after) per dim: the pad list pairs up from the last dim backwards."""
    if len(pads) % 2 or len(pads) > 2 * len(dims):
        raise _fail(A, f"pad {list(pads)} does not pair up over {len(dims)} dims")
    pairs = [(0, 0)] * len(dims)
    for k in range(len(pads) // 2):
        pairs[len(dims) - 1 - k] = (pads[2 * k], pads[2 * k + 1])
    return pairs


def _pad(A, dims, pads) -> tuple[GatherMap, tuple[int, ...]]:
    pairs = _pad_pairs(A, dims, pads)
    out = tuple(n + lo + hi for n, (lo, hi) in zip(dims, pairs))
    if any(max(0, -lo) + max(0, -hi) > n for n, (lo, hi) in zip(dims, pairs)):
        raise _fail(A, f"pad {list(pads)} crops more than {list(dims)} holds")
    axes, offset = [], 0
    for size, n, s, (lo, _) in zip(out, dims, contiguous_strides(dims), pairs):
        axis, shift = pad_axis(size, s, lo, n)
        axes.append(axis)
        offset += shift
    return GatherMap(tuple(axes), offset), out


def _shuffle_dims(A, dims, r: int, unshuffle: bool) -> tuple[int, ...]:
    """The input viewed as (*batch, C, r, r, H, W) (shuffle) or (*batch, C, H, r, W, r)."""
    if len(dims) < 3 or r <= 0:
        raise _fail(A, f"needs rank >= 3 and a positive factor, got {list(dims)} and {r}")
    *batch, c, h, w = dims
    if unshuffle:
        if h % r or w % r:
            raise _fail(A, f"H and W of {list(dims)} are not multiples of {r}")
        return (*batch, c, h // r, r, w // r, r)
    if c % (r * r):
        raise _fail(A, f"channels of {list(dims)} are not a multiple of {r}*{r}")
    return (*batch, c // (r * r), r, r, h, w)


def _shuffle_perm(rank: int, unshuffle: bool) -> list[int]:
    b = rank - 5
    # shuffle: (C, r_h, r_w, H, W) -> (C, H, r_h, W, r_w); unshuffle: (C, H, r_h, W, r_w) ->
    # (C, r_h, r_w, H, W).
    tail = [0, 2, 4, 1, 3] if unshuffle else [0, 3, 1, 4, 2]
    return list(range(b)) + [b + t for t in tail]


def _shuffle(A, dims, r: int, unshuffle: bool) -> tuple[GatherMap, tuple[int, ...]]:
    view = _shuffle_dims(A, dims, r, unshuffle)
    strides = contiguous_strides(view)
    perm = _shuffle_perm(len(view), unshuffle)
    *batch, c, h, w = dims
    out = (*batch, c * r * r, h // r, w // r) if unshuffle else (*batch, c // (r * r),
                                                                    h * r, w * r)
    return GatherMap(tuple(Axis(view[p], strides[p]) for p in perm)), out


def _plan(A, call) -> tuple[int, GatherMap, int, float]:
    """(x, map, out, pad value) with the output's dims checked."""
    x, arg, *rest = call.args
    out = rest[-1]
    dims = tuple(A.tensor(x).dims)
    name = call.name
    if name == _EXPAND:
        gmap, want = _expand(A, dims, A.ints(arg))
    elif name == _REPEAT:
        gmap, want = _repeat(A, dims, A.ints(arg))
    elif name == _FLIP:
        gmap, want = _flip(A, dims, A.ints(arg))
    elif name == _PAD:
        gmap, want = _pad(A, dims, A.ints(arg))
    else:
        gmap, want = _shuffle(A, dims, A.int(arg), name == _UNSHUFFLE)
    got = tuple(A.tensor(out).dims)
    if got != want:
        raise _fail(A, f"gives dims {list(want)}, the output tensor has {list(got)}")
    return x, gmap, out, A.float(rest[0]) if name == _PAD else 0.0


def lower(L, call) -> None:
    x, gmap, out, pad = _plan(L.args, call)
    emit_gather(L, x, out, gmap, call.name.split(".")[1], pad=pad)


def _pad_reference(v, pairs, value):
    crop = tuple(slice(max(0, -lo), n - max(0, -hi)) for n, (lo, hi) in zip(v.shape, pairs))
    grow = [(max(0, lo), max(0, hi)) for lo, hi in pairs]
    return np.pad(v[crop], grow, constant_values=value)


def reference(R, call) -> None:
    x, _, out, pad = _plan(R.args, call)
    A, arg, name = R.args, call.args[1], call.name
    v = computed(R.get(x))
    dims = v.shape
    if name == _EXPAND:
        sizes = A.ints(arg)
        lead = len(sizes) - len(dims)
        r = np.broadcast_to(v.reshape((1,) * lead + dims), R.args.tensor(out).dims)
    elif name == _REPEAT:
        r = np.tile(v, A.ints(arg))
    elif name == _FLIP:
        r = np.flip(v, tuple(norm_dim(d, len(dims), A.op_name) for d in A.ints(arg)))
    elif name == _PAD:
        r = _pad_reference(v, _pad_pairs(A, dims, A.ints(arg)), pad_value(v, pad))
    else:
        unshuffle = name == _UNSHUFFLE
        view = _shuffle_dims(A, dims, A.int(arg), unshuffle)
        r = v.reshape(view).transpose(_shuffle_perm(len(view), unshuffle))
    store(R, out, r)


UNITS = [OpUnit((_EXPAND, _REPEAT, _FLIP, _PAD, _SHUFFLE, _UNSHUFFLE), lower, reference,
                {_EXPAND: "T I b T", _REPEAT: "T I T", _FLIP: "T I T", _PAD: "T I f T",
                 _SHUFFLE: "T i T", _UNSHUFFLE: "T i T"})]
