"""et_vk.q8ta_conv2d* and q8ta_linear*: int32 window sums exact, int8 requantization."""

import numpy as np
import pytest

from harness import assert_close
from test_op_q8 import VARIANTS, run_both
from test_op_q8ta import check_against_f64, int8, q64
from webpte.errors import PlanError, UnsupportedOpError
from webpte.planner import lower
from webpte.pte.builder import GraphBuilder

CONV = "et_vk.q8ta_conv2d.default"
CONV_DW = "et_vk.q8ta_conv2d_dw.default"
CONV_T = "et_vk.q8ta_conv2d_transposed.default"
LINEAR = "et_vk.q8ta_linear.default"
GEMV = "et_vk.q8ta_linear_gemv.default"


def pad4(a, axis=-1):
    """Zero-pad `axis` to a multiple of 4, as the partitioner aligns widths."""
    extra = -a.shape[axis] % 4
    widths = [(0, 0)] * a.ndim
    widths[axis] = (0, extra)
    return np.pad(a, widths)


def serialized_weight(w, kind, groups):
    """torch's conv weight in the partitioner's layout (patterns/quantized_convolution.py)."""
    if kind == "dw":  # (C, 1, KH, KW) -> (KH, KW, C)
        return np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(w.shape[2], w.shape[3], -1))
    if kind == "transposed":  # (IC, OC/g, KH, KW) -> (OC, KH*KW*IC/g)
        ic, ocg, kh, kw = w.shape
        m = w.reshape(groups, ic // groups, ocg, kh, kw).transpose(0, 2, 3, 4, 1)
        return pad4(m.reshape(groups * ocg, -1))
    return pad4(w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1))  # (OC, KH*KW*IC/g)


def conv_adj64(x, zp, w, kind, groups, stride, pad, dil, out_pad=(0, 0)):
    """Independent int64 sum of (x - zp) * w with torch's conv / conv_transpose2d rules."""
    xz = x.astype(np.int64) - zp
    n, ic, ih, iw = x.shape
    icg = ic // groups
    if kind == "transposed":
        _, ocg, kh, kw = w.shape
        full = [(i - 1) * s + d * (k - 1) + 1 + op for i, s, d, k, op in
                zip((ih, iw), stride, dil, (kh, kw), out_pad, strict=True)]
        out = np.zeros((n, groups * ocg, *full), np.int64)
        for g in range(groups):
            xs, ws = xz[:, g * icg:(g + 1) * icg], w[g * icg:(g + 1) * icg].astype(np.int64)
            for a in range(kh):
                for b in range(kw):
                    contrib = np.einsum("nihw,io->nohw", xs, ws[:, :, a, b])
                    out[:, g * ocg:(g + 1) * ocg,
                        a * dil[0]: a * dil[0] + (ih - 1) * stride[0] + 1: stride[0],
                        b * dil[1]: b * dil[1] + (iw - 1) * stride[1] + 1: stride[1]] += contrib
        oh = full[0] - 2 * pad[0]
        ow = full[1] - 2 * pad[1]
        return out[:, :, pad[0]: pad[0] + oh, pad[1]: pad[1] + ow]
    oc, _, kh, kw = w.shape
    ocg = oc // groups
    xp = np.pad(xz, ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2))
    oh = (ih + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (iw + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, oc, oh, ow), np.int64)
    for g in range(groups):
        ws = w[g * ocg:(g + 1) * ocg].astype(np.int64)
        for a in range(kh):
            for b in range(kw):
                win = xp[:, g * icg:(g + 1) * icg,
                         a * dil[0]: a * dil[0] + (oh - 1) * stride[0] + 1: stride[0],
                         b * dil[1]: b * dil[1] + (ow - 1) * stride[1] + 1: stride[1]]
                out[:, g * ocg:(g + 1) * ocg] += np.einsum("nihw,oi->nohw", win, ws[:, :, a, b])
    return out


def conv_graph(case, wq, scales, bias, q_in, q_out, act="none", name=None, out_shape=None):
    kind, groups = case["kind"], case["groups"]
    sw = serialized_weight(wq, kind, groups)
    sums = pad4(sw.astype(np.int64).sum((0, 1) if kind == "dw" else 1).astype(np.int32))
    oc = sums.size if kind == "dw" else sw.shape[0]
    adj = conv_adj64(case["x"], q_in[1], wq, kind, groups, case["stride"], case["pad"],
                     case["dil"], case.get("out_pad", (0, 0)))
    b = GraphBuilder()
    x = b.tensor(np.int8, case["x"].shape)
    o = b.tensor(np.int8, adj.shape if out_shape is None else out_shape)
    name = name or {"dw": CONV_DW, "transposed": CONV_T}.get(kind, CONV)
    lists = [case["kernel"], case["stride"], case["pad"]]
    if kind == "transposed":
        lists.append(case.get("out_pad", (0, 0)))
    lists.append(case["dil"])
    b.op(name, x, b.scalar(q_in[0]), b.scalar(q_in[1]), b.constant(sw), b.constant(sums),
         b.constant(pad4(scales[:oc].astype(np.float32))),
         b.scalar(q_out[0]), b.scalar(q_out[1]),
         b.scalar(None) if bias is None else b.constant(pad4(bias[:oc].astype(np.float32))),
         *[b.scalar(tuple(v)) for v in lists], b.scalar(groups), b.scalar(act), o)
    return b.build([x], [o]), adj


# (kind, IC, OC, kernel, stride, padding, dilation, groups, N, H, W[, output_padding])
CONV_CASES = {
    "k3": ("conv", 8, 8, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 8, 8),
    "ic3_oc5": ("conv", 3, 5, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 7, 9),
    "asym_stride2": ("conv", 4, 6, (3, 5), (2, 2), (1, 2), (1, 1), 1, 2, 9, 11),
    "dil2": ("conv", 5, 4, (3, 3), (1, 1), (2, 2), (2, 2), 1, 1, 8, 7),
    "groups2": ("conv", 6, 4, (3, 3), (1, 2), (1, 1), (1, 1), 2, 1, 5, 5),
    "pw": ("conv", 12, 7, (1, 1), (1, 1), (0, 0), (1, 1), 1, 2, 3, 5),
    "dw_s2": ("dw", 8, 8, (3, 3), (2, 2), (1, 1), (1, 1), 8, 1, 9, 9),
    "dw_k5_dil2": ("dw", 4, 4, (5, 5), (1, 1), (4, 3), (2, 2), 4, 2, 6, 7),
    "t_s2": ("transposed", 8, 8, (2, 2), (2, 2), (0, 0), (1, 1), 1, 1, 4, 4),
    "t_k3_op1": ("transposed", 3, 6, (3, 3), (2, 2), (1, 1), (1, 1), 1, 2, 5, 3, (1, 1)),
    "t_groups2": ("transposed", 4, 6, (3, 2), (2, 3), (1, 0), (1, 1), 2, 1, 3, 4, (0, 2)),
    "t_dil2": ("transposed", 4, 4, (3, 3), (1, 1), (1, 1), (2, 2), 1, 1, 4, 5),
}


def make_case(rng, spec):
    kind, ic, oc, kernel, stride, pad, dil, groups, n, h, w, *op = spec
    wshape = {"transposed": (ic, oc // groups, *kernel)}.get(kind, (oc, ic // groups, *kernel))
    return {"kind": kind, "groups": groups, "kernel": kernel, "stride": stride, "pad": pad,
            "dil": dil, "out_pad": op[0] if op else (0, 0), "x": int8(rng, (n, ic, h, w)),
            "w": rng.integers(-127, 128, wshape).astype(np.int8), "oc": oc}


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("name", CONV_CASES)
def test_conv_window_sums_exact(gpu, rng, features, name):
    # Input scale 1, weight scales 1, output scale 2^c: every f32 step is exact, so the
    # int8 result is round_half_even(adj / 2^c) + zp of the exact int64 window sum.
    case = make_case(rng, CONV_CASES[name])
    ones = np.ones(case["oc"], np.float32)
    (g, blob), adj = conv_graph(case, case["w"], ones, None, (1.0, -7), (1.0, 0))
    c = max(0, int(np.round(np.log2(np.abs(adj).mean() / 40 + 1))))
    (g, blob), _ = conv_graph(case, case["w"], ones, None, (1.0, -7), (2.0 ** c, 3))
    (out,), (ref,) = run_both(g, blob, [case["x"]], features)
    want = np.clip(np.round(adj / 2.0 ** c) + 3, -128, 127).astype(np.int8)
    assert 0.05 < (np.abs(want) < 127).mean(), "most outputs should be unclamped"
    assert_close(ref, want, exact=True, what="reference vs int64 convolution")
    assert_close(out, ref, exact=True, what=name)


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("name,act,with_bias", [("k3", "relu", True), ("ic3_oc5", "none", True),
                                                ("dw_s2", "relu", False),
                                                ("t_k3_op1", "none", True)])
def test_conv_requantization(gpu, rng, features, name, act, with_bias):
    case = make_case(rng, CONV_CASES[name])
    scales = rng.uniform(2e-3, 2e-2, case["oc"]).astype(np.float32)
    bias = rng.standard_normal(case["oc"]).astype(np.float32) if with_bias else None
    q_in, q_out = (0.0213, -35), (0.0177, 11)
    (g, blob), adj = conv_graph(case, case["w"], scales, bias, q_in, q_out, act)
    (out,), (ref,) = run_both(g, blob, [case["x"]], features)
    y = adj * np.float64(np.float32(q_in[0])) * scales[None, :, None, None]
    if bias is not None:
        y = y + bias[None, :, None, None]
    if act == "relu":
        y = np.maximum(y, 0)
    check_against_f64(ref, q64(y, *q_out), y, q_out[0])
    assert_close(out, ref, exact=True, what=f"{name} requantized")


def linear_graph(name, x_shape, w, scales, bias, q_in, q_out, act="none"):
    n = w.shape[0]
    b = GraphBuilder()
    x = b.tensor(np.int8, x_shape)
    o = b.tensor(np.int8, (*x_shape[:-1], n))
    sums = pad4(w.astype(np.int64).sum(1).astype(np.int32))
    b.op(name, x, b.scalar(q_in[0]), b.scalar(q_in[1]), b.constant(w), b.constant(sums),
         b.constant(pad4(scales)), b.scalar(q_out[0]), b.scalar(q_out[1]),
         b.scalar(None) if bias is None else b.constant(pad4(bias)), b.scalar(act), o)
    return b.build([x], [o])


@pytest.mark.parametrize("features", VARIANTS)
@pytest.mark.parametrize("name,x_shape,n", [(GEMV, (1, 16), 8), (LINEAR, (4, 36), 5),
                                            (LINEAR, (7, 13), 9), (LINEAR, (3, 772), 67),
                                            (LINEAR, (1, 5, 20), 3)])
def test_linear(gpu, rng, features, name, x_shape, n):
    k = x_shape[-1]
    w = rng.integers(-127, 128, (n, k)).astype(np.int8)
    x = int8(rng, x_shape)
    adj = (x.astype(np.int64) - 9) @ w.astype(np.int64).T
    c = max(0, int(np.round(np.log2(np.abs(adj).mean() / 40 + 1))))
    ones = np.ones(n, np.float32)
    g, blob = linear_graph(name, x_shape, w, ones, None, (1.0, 9), (2.0 ** c, -4))
    (out,), (ref,) = run_both(g, blob, [x], features)
    want = np.clip(np.round(adj / 2.0 ** c) - 4, -128, 127).astype(np.int8)
    assert_close(ref, want, exact=True, what="reference vs int64 matmul")
    assert_close(out, ref, exact=True, what="exact linear")
    scales = rng.uniform(2e-3, 2e-2, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    q_in, q_out = (0.0178, 9), (0.0399, -4)
    g, blob = linear_graph(name, x_shape, w, scales, bias, q_in, q_out, "relu")
    (out,), (ref,) = run_both(g, blob, [x], features)
    y = np.maximum(adj * np.float64(np.float32(q_in[0])) * scales + bias, 0)
    check_against_f64(ref, q64(y, *q_out), y, q_out[0])
    assert_close(out, ref, exact=True, what="requantized linear")


def test_unsupported_forms(rng):
    case = make_case(rng, CONV_CASES["k3"])
    ones = np.ones(8, np.float32)
    (g, _), _ = conv_graph(case, case["w"], ones, None, (1.0, 0), (1.0, 0), act="gelu")
    with pytest.raises(UnsupportedOpError, match="activation 'gelu'"):
        lower(g)
    (g, _), _ = conv_graph(case, case["w"], ones, None, (1.0, 0), (1.0, 300))
    with pytest.raises(UnsupportedOpError, match="zero point 300"):
        lower(g)
    # a regular weight given to the depthwise op
    (g, _), _ = conv_graph(case, case["w"], ones, None, (1.0, 0), (1.0, 0), name=CONV_DW)
    with pytest.raises(UnsupportedOpError, match="depthwise needs"):
        lower(g)
    w = rng.integers(-127, 128, (4, 16)).astype(np.int8)
    g, _ = linear_graph(LINEAR, (3, 12), w, np.ones(4, np.float32), None, (1.0, 0), (1.0, 0))
    with pytest.raises(UnsupportedOpError, match="are not x"):
        lower(g)


def test_output_dims_checked(rng):
    case = make_case(rng, CONV_CASES["k3"])
    (g, _), _ = conv_graph(case, case["w"], np.ones(8, np.float32), None, (1.0, 0), (1.0, 0),
                           out_shape=(1, 8, 7, 8))
    with pytest.raises(PlanError, match="gives"):
        lower(g)
