"""aten.convolution.default in the patch-embedding form (stride == kernel, no padding).

Each output pixel is one patch, so the convolution is a matmul out[n] = W[O, C*kh*kw] @
patches[n][C*kh*kw, Ho*Wo]; it runs on the tiled matmul kernel with a patch-gather B
(matmul.py). Rows/columns of the input past the last whole patch are dropped (floor, like
torch). The numpy reference accumulates in float64 and rounds to float32.
"""

from __future__ import annotations

from ...errors import UnsupportedOpError
from .._np import np
from ..matmul.matmul import emit_matmul
from ..registry import OpUnit


def _pair(v: tuple[int, ...], what: str) -> tuple[int, int] | str:
    if len(v) == 1:
        return v[0], v[0]
    if len(v) == 2:
        return v[0], v[1]
    return f"{what} {list(v)} is not 2-D"


def _parse(A, call):
    """(x, w, b, out, geometry dict, why-unsupported or None)."""
    (x, w, b, stride_id, padding_id, dilation_id, transposed_id, output_padding_id,
     groups_id, out) = call.args
    dx, dw, do = (tuple(A.tensor(v).dims) for v in (x, w, out))
    bias = None if A.is_null(b) else b
    geo: dict = {}
    stride = _pair(A.ints(stride_id), "stride")
    if A.bool(transposed_id):
        why = "transposed convolution is not supported"
    elif A.int(groups_id) != 1:
        why = f"groups={A.int(groups_id)} is not supported (only groups=1)"
    elif any(d != 1 for d in A.ints(dilation_id)):
        why = f"dilation {list(A.ints(dilation_id))} is not supported (only 1)"
    elif any(p != 0 for p in A.ints(padding_id)):
        why = f"padding {list(A.ints(padding_id))} is not supported (only 0)"
    elif any(p != 0 for p in A.ints(output_padding_id)):
        why = f"output_padding {list(A.ints(output_padding_id))} is not supported (only 0)"
    elif len(dx) != 4 or len(dw) != 4:
        why = f"only 2-D convolution is supported: x {list(dx)}, weight {list(dw)}"
    elif isinstance(stride, str):
        why = stride
    elif stride != dw[2:]:
        why = (f"stride {list(stride)} differs from the kernel size {list(dw[2:])}: only "
               f"patch embeddings (stride == kernel) are supported")
    elif dw[1] != dx[1]:
        why = f"weight has {dw[1]} input channels, x has {dx[1]}"
    elif dx[2] < dw[2] or dx[3] < dw[3]:
        why = f"input {list(dx[2:])} is smaller than the kernel {list(dw[2:])}"
    elif do != (dx[0], dw[0], dx[2] // dw[2], dx[3] // dw[3]):
        why = f"output {list(do)} does not match x {list(dx)} and weight {list(dw)}"
    elif bias is not None and tuple(A.tensor(bias).dims) != (dw[0],):
        why = f"bias must be [{dw[0]}], got {list(A.tensor(bias).dims)}"
    else:
        why = None
        (n, c, h, wd), (o, _, kh, kw) = dx, dw
        geo = dict(n=n, c=c, h=h, w=wd, o=o, kh=kh, kw=kw, ho=h // kh, wo=wd // kw)
    return x, w, bias, out, geo, why


def lower(L, call) -> None:
    x, w, bias, out, g, why = _parse(L.args, call)
    if why:
        raise L.unsupported(why)
    K = g["c"] * g["kh"] * g["kw"]
    # Four consecutive k (= kernel columns) are contiguous in x when kw and W allow vec4.
    b_fill = "k4" if g["kw"] % 4 == 0 and g["w"] % 4 == 0 else "scalar"
    emit_matmul(L, "convolution", w, x, out, batch=g["n"], M=g["o"], N=g["ho"] * g["wo"], K=K,
                a_strides=(0, K, 1), b_strides=(g["c"] * g["h"] * g["w"], 0, 0),
                bias=bias, bias_axis="m", b_fill=b_fill, b_layout="patch",
                kh=g["kh"], kw=g["kw"], in_h=g["h"], in_w=g["w"], out_w=g["wo"])


def reference(R, call) -> None:
    x, w, bias, out, g, why = _parse(R.args, call)
    if why:
        raise UnsupportedOpError(f"reference: {why}", [call.name])
    n, c, ho, wo, kh, kw = g["n"], g["c"], g["ho"], g["wo"], g["kh"], g["kw"]
    xv = R.get(x).astype(np.float64)[:, :, :ho * kh, :wo * kw]
    patches = xv.reshape(n, c, ho, kh, wo, kw)
    y = np.einsum("nchiwj,ocij->nohw", patches, R.get(w).astype(np.float64))
    if bias is not None:
        y = y + R.get(bias).astype(np.float64)[None, :, None, None]
    R.set(out, y)


UNITS = [OpUnit(("aten.convolution.default",), lower, reference,
                {"aten.convolution.default": "T T T? I I I b I i T"})]
