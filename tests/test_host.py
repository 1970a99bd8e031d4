"""Tier 0 host contract: windows, sampling, model folders, image preprocessing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from webpte.errors import InputError
from webpte.host import (
    ContextFullError,
    ModelFolderError,
    Sampler,
    SamplingOptions,
    extend_starts,
    resolve_model_folder,
    window_starts,
)
from webpte.host.files import SMOLVLM_FILES


def _covered(starts, rows):
    return sorted({s + r for s in starts for r in range(rows)})


@pytest.mark.parametrize("n", range(4, 513))
def test_window_plan_covers_every_position_once_in_order(n):
    starts = window_starts(n, 4, 512)
    assert starts[0] == 0 and starts[-1] == n - 4          # last window ends at the newest
    assert _covered(starts, 4) == list(range(n))
    assert all(b - a == 4 for a, b in zip(starts[:-2], starts[1:-1]))
    assert 0 < starts[-1] - starts[-2] <= 4 if len(starts) > 1 else True
    assert len(starts) == -(-n // 4)


def test_window_plan_examples():
    assert window_starts(4) == [0]
    assert window_starts(11) == [0, 4, 7]                  # overlapping last window
    assert window_starts(79) == list(range(0, 76, 4)) + [75]
    assert window_starts(512) == list(range(0, 509, 4))


@pytest.mark.parametrize("n,err", [(3, InputError), (0, InputError), (513, ContextFullError)])
def test_window_plan_refusals(n, err):
    with pytest.raises(err):
        window_starts(n, 4, 512)


def test_extend_starts_feeds_only_new_rows():
    # 79 cached, 85 now: windows must cover 79..84 and end at 84.
    starts = extend_starts(79, 85, 4, 512)
    assert starts[-1] == 81 and set(range(79, 85)) <= set(_covered(starts, 4))
    assert min(starts) >= 79 - 3
    assert extend_starts(10, 10) == []
    assert extend_starts(0, 9) == window_starts(9)
    with pytest.raises(ContextFullError):
        extend_starts(500, 513)


def test_greedy_and_seeded_sampling():
    rng = np.random.default_rng(7)
    logits = rng.standard_normal(1000).astype(np.float32)
    assert Sampler()(logits) == int(np.argmax(logits))
    opts = SamplingOptions(temperature=0.8, top_k=50, top_p=0.9, seed=1234)
    a = [Sampler(opts)(logits) for _ in range(3)]
    s1, s2 = Sampler(opts), Sampler(opts)
    seq1 = [s1(logits) for _ in range(20)]
    seq2 = [s2(logits) for _ in range(20)]
    assert seq1 == seq2 and len(set(a)) == 1
    top50 = set(np.argsort(-logits)[:50].tolist())
    assert set(seq1) <= top50
    other = Sampler(SamplingOptions(temperature=0.8, top_k=50, top_p=0.9, seed=99))
    assert [other(logits) for _ in range(20)] != seq1


def test_top_p_and_repetition_penalty():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], np.float64))
    s = Sampler(SamplingOptions(temperature=1.0, top_p=0.75, seed=0))
    picks = {s(logits) for _ in range(200)}
    assert picks == {0, 1}                                  # 0.5 + 0.3 reaches 0.75
    greedy_pen = Sampler(SamplingOptions(repetition_penalty=10.0))
    assert greedy_pen(np.array([2.0, 1.9, -1.0]), history=[0]) == 1
    with pytest.raises(ValueError):
        SamplingOptions(top_p=0)


def test_model_folder_lists_every_problem(tmp_path):
    with pytest.raises(ModelFolderError, match="not a folder"):
        resolve_model_folder(tmp_path / "nope")
    (tmp_path / "webpte_model.json").write_text(json.dumps({
        "format": "webpte-model/1", "decoder": "d.pte", "embed_tokens": "e.bin"}))
    with pytest.raises(ModelFolderError) as e:
        resolve_model_folder(tmp_path)
    text = str(e.value)
    for needle in ("missing d.pte", "missing e.bin", "'embed_scales'", "tokenizer.json"):
        assert needle in text


def test_smolvlm_folder_is_checked_against_pinned_hashes(tmp_path):
    (tmp_path / "tokenizer").mkdir()
    for name in SMOLVLM_FILES:
        (tmp_path / name).write_bytes(b"x" * 10)
    with pytest.raises(ModelFolderError) as e:
        resolve_model_folder(tmp_path)
    text = str(e.value)
    assert "smolvlm_decoder_q8.pte is 10 bytes, the published file is 366912132" in text
    assert "tokenizer/tokenizer.json does not match the published sha256" in text


def test_image_preprocessing_known_values(tmp_path):
    from PIL import Image

    from webpte.host.image import preprocess_image

    arr = np.zeros((512, 512, 3), np.uint8)
    arr[..., 0] = 255                      # red channel full
    arr[:256, :, 1] = 51                   # green 0.2 on the top half
    path = tmp_path / "img.png"
    Image.fromarray(arr).save(path)
    x = preprocess_image(path)
    assert x.shape == (1, 3, 512, 512) and x.dtype == np.float32
    assert np.all(x[0, 0] == 1.0)
    assert np.allclose(x[0, 1, :256], (51 / 255 - 0.5) / 0.5) and np.all(x[0, 1, 256:] == -1.0)
    assert np.all(x[0, 2] == -1.0)
    small = preprocess_image(Image.fromarray(arr[:100, :80]))   # resized to 512x512
    assert small.shape == (1, 3, 512, 512)
    with pytest.raises(InputError):
        preprocess_image(b"not an image")


def test_turn_decisions():
    from webpte.host.turn import Contract, prefill_windows, reusable_prefix, stop_reason

    c = Contract(rows=4, max_context=32, sink_id=1, sink_token="<|im_start|>",
                 stop_ids=frozenset({2}))
    with pytest.raises(InputError, match="attention-sink"):
        prefill_windows([], [5, 6, 7, 8], c)
    assert prefill_windows([], [1, 5, 6, 7, 8], c) == (0, [0, 1])
    assert reusable_prefix([1, 5, 6, 9], [1, 5, 6, 7, 8]) == 3
    reuse, starts = prefill_windows([1, 5, 6, 7, 8, 9, 10], [1, 5, 6, 7, 8, 9, 10, 11, 12], c)
    assert reuse == 7 and starts == [5]
    # a prompt that is all cached still feeds its newest row (its logits pick the next token)
    same = [1, 5, 6, 7, 8, 9, 10]
    reuse, starts = prefill_windows(same + [3], same, c)
    assert reuse == 6 and starts == [3]
    with pytest.raises(ContextFullError):
        prefill_windows([], [1] * 32, c)
    assert stop_reason(None, 3, 10, 3, c) == "max_new_tokens"
    assert stop_reason(None, 0, 32, 3, c) == "context_full"
    assert stop_reason(2, 0, 10, 3, c) == "stop_token"
    assert stop_reason(7, 0, 10, 3, c) is None


# -- hostile model folders: every named file stays inside the folder -----------------------

HOSTILE = [
    {"decoder": "/etc/passwd"}, {"tokenizer": "../../../../etc"}, {"decoder": "a/../../x.pte"},
    {"decoder": "https://evil.example/x.pte"}, {"embed_tokens": "C:\\x.bin"},
    {"vision": "x.pte?x=1"}, {"decoder": "%2e%2e/x.pte"}, {"decoder": ""}, {"decoder": 7},
    {"embed_scales": "./s.bin"}, {"tokenizer": "tok//x"}, {"decoder": "d\x00.pte"},
    {"sha256": {"../x": "0" * 64}}, {"hidden_size": 1 << 40}, {"stop_tokens": "x"},
    {"name": "n" * 1000},
]


@pytest.mark.parametrize("bad", HOSTILE, ids=[repr(h)[:40] for h in HOSTILE])
def test_meta_files_cannot_name_files_outside_their_folder(tmp_path, bad):
    import json

    from webpte.host.files import META_NAME, ModelFolderError, folder_manifest

    meta = {"format": "webpte-model/1", "decoder": "d.pte", "embed_tokens": "e.bin",
            "embed_scales": "s.bin", **bad}
    (tmp_path / META_NAME).write_text(json.dumps(meta))
    with pytest.raises(ModelFolderError, match="not a plain relative path|must be|at most"):
        resolve_model_folder(tmp_path, verify=False)
    with pytest.raises(ModelFolderError):
        folder_manifest(META_NAME, meta)      # what the page asks before fetching anything


def test_a_symlink_out_of_the_folder_is_refused(tmp_path):
    import json

    from webpte.host.files import META_NAME, ModelFolderError

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "tokenizer.json").write_text("{}")
    (outside / "tokenizer_config.json").write_text("{}")
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("d.pte", "e.bin", "s.bin"):
        (folder / name).write_bytes(b"x")
    (folder / "tokenizer").symlink_to(outside)
    (folder / META_NAME).write_text(json.dumps({
        "format": "webpte-model/1", "decoder": "d.pte", "embed_tokens": "e.bin",
        "embed_scales": "s.bin"}))
    with pytest.raises(ModelFolderError, match="leads outside the model folder"):
        resolve_model_folder(folder, verify=False)


def test_an_oversized_meta_file_is_refused_before_it_is_read(tmp_path):
    from webpte.host.files import MAX_META_BYTES, META_NAME, ModelFolderError

    (tmp_path / META_NAME).write_bytes(b" " * (MAX_META_BYTES + 1))
    with pytest.raises(ModelFolderError, match="a meta file is at most"):
        resolve_model_folder(tmp_path, verify=False)
