"""et_vk.q8ta_add / q8ta_relu / q8ta_pixel_shuffle: int8 in, int8 out, through f32.

Semantics (custom_ops_lib.py's torch references, every step in f32, see q8ta_common.py):
    add:            quantize(dq(a) + f32(alpha) * dq(b))         a, b of the same shape
    relu:           quantize(max(dq(x), 0))
    pixel_shuffle:  quantize(pixel_shuffle(dq(x), r)); the op passes the output's
                    1/scale, and torch's reference takes scale = 1/that and then
                    quantizes with f32(1/scale), both divisions in double.
One kernel, one packed output word (four elements) per invocation. All scales and zero
points are words of a params buffer, so the same shape shares one pipeline:
    p[0], p[1]: a's f32 scale, i32 zero point   p[2], p[3]: b's (add only)
    p[4]: f32 alpha   p[5]: zero (opaque_f32)   p[6..9]: the output quantization
"""

from __future__ import annotations

from ...errors import PlanError
from .._np import np
from ..registry import OpUnit
from .q8ta_common import check_zero_point, dequantize_ref, requant_params, requant_ref, require_int8
from .quantize import f32

ADD = "et_vk.q8ta_add.default"
RELU = "et_vk.q8ta_relu.default"
PIXEL_SHUFFLE = "et_vk.q8ta_pixel_shuffle.default"
WORKGROUP = 256


def _parse(A, call) -> dict:
    """The call as data: inputs, out, input qparams, output QuantParams, op constants."""
    if call.name == ADD:
        a, b, sa, za, sb, zb, so, zo, alpha, out = call.args
        spec = {"op": "add", "inputs": (a, b), "q": ((A.float(sa), A.int(za)),
                                                    (A.float(sb), A.int(zb))),
                "alpha": A.float(alpha), "out_scale": A.float(so)}
    elif call.name == RELU:
        x, sx, zx, so, zo, out = call.args
        spec = {"op": "relu", "inputs": (x,), "q": ((A.float(sx), A.int(zx)),),
                "alpha": 1.0, "out_scale": A.float(so)}
    else:
        x, sx, zx, inv, zo, r, out = call.args
        inv_scale = A.float(inv)
        if not 0 < inv_scale < float("inf"):
            raise PlanError(f"{A.op_name}: output 1/scale must be positive, got {inv_scale}")
        spec = {"op": "pixel_shuffle", "inputs": (x,), "q": ((A.float(sx), A.int(zx)),),
                "alpha": 1.0, "out_scale": 1.0 / inv_scale, "r": A.int(r)}
    spec["out"] = out
    spec["params"] = requant_params(spec["out_scale"], A.int(zo))
    require_int8(A, call, (*spec["inputs"], out))
    for scale, zp in spec["q"]:
        check_zero_point(A, call, zp)
        if not 0 < scale < float("inf"):
            raise PlanError(f"{A.op_name}: input scale must be positive, got {scale}")
    _check_shapes(A, call, spec)
    return spec


def _check_shapes(A, call, spec) -> None:
    dims = [tuple(A.tensor(v).dims) for v in spec["inputs"]]
    out = tuple(A.tensor(spec["out"]).dims)
    if spec["op"] != "pixel_shuffle":
        if any(d != out for d in dims):
            raise A.unsupported(call, f"input dims {[list(d) for d in dims]} and output "
                                      f"{list(out)} differ (no broadcasting)")
        return
    r, d = spec["r"], dims[0]
    if r < 1 or len(d) < 3 or d[-3] % (r * r):
        raise A.unsupported(call, f"pixel_shuffle of dims {list(d)} by {r} (needs rank >= 3 "
                                  f"and channels divisible by r*r)")
    want = (*d[:-3], d[-3] // (r * r), d[-2] * r, d[-1] * r)
    if out != want:
        raise PlanError(f"{A.op_name}: pixel_shuffle gives dims {list(want)}, the output "
                        f"tensor has {list(out)}")


def lower(L, call) -> None:
    spec = _parse(L.args, call)
    n = L.tensor(spec["out"]).numel
    if n == 0:
        return
    shape = {"oh": 1, "ow": 1, "r": 1, "h": 1, "w": 1}
    if spec["op"] == "pixel_shuffle":
        d, r = L.tensor(spec["inputs"][0]).dims, spec["r"]
        shape = {"oh": d[-2] * r, "ow": d[-1] * r, "r": r, "h": d[-2], "w": d[-1]}
    groups, row = L.grid(-(-n // 4), WORKGROUP)
    kern = L.kernel("quantized/q8ta_elementwise", op=spec["op"], n=n, workgroup=WORKGROUP,
                    row=row, **shape)
    (sa, za), (sb, zb) = (spec["q"] * 2)[:2]
    params = L.params(f32(sa), za, f32(sb), zb, f32(spec["alpha"]), 0, *spec["params"])
    bufs = [L.buf(v) for v in spec["inputs"]]
    L.dispatch(kern, bufs + [params, L.buf(spec["out"])], groups)


def pixel_shuffle_ref(x: np.ndarray, r: int) -> np.ndarray:
    """(..., C*r*r, H, W) -> (..., C, H*r, W*r), torch's channel order."""
    *lead, crr, h, w = x.shape
    c = crr // (r * r)
    y = x.reshape(*lead, c, r, r, h, w)
    k = len(lead)
    y = y.transpose(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return y.reshape(*lead, c, h * r, w * r)


def reference(R, call) -> None:
    spec = _parse(R.args, call)
    deq = [dequantize_ref(R.get(v), s, z) for v, (s, z) in zip(spec["inputs"], spec["q"])]
    if spec["op"] == "add":
        y = deq[0] + np.float32(f32(spec["alpha"])) * deq[1]
    elif spec["op"] == "relu":
        y = np.maximum(deq[0], np.float32(0))
    else:
        y = pixel_shuffle_ref(deq[0], spec["r"])
    R.set(spec["out"], requant_ref(y, spec["params"]))


UNITS = [OpUnit((ADD, RELU, PIXEL_SHUFFLE), lower, reference,
                {ADD: "Tq Tq f i f i f i f Tq", RELU: "Tq f i f i Tq",
                 PIXEL_SHUFFLE: "Tq f i f i i Tq"})]
