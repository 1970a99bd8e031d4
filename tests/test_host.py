"""Tier 0 host contract: windows, sampling, model folders, image preprocessing."""

from __future__ import annotations

import json
from pathlib import Path

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
from webpte.host.prompt import Turn

FIXTURES = Path(__file__).parent / "fixtures"


def _covered(starts, rows):
    return sorted({s + r for s in starts for r in range(rows)})


@pytest.mark.parametrize("n", range(4, 513))
def test_window_plan_covers_every_position_once_in_order(n):
    starts = window_starts(n, 4, 512)
    assert starts[0] == 0 and starts[-1] == n - 4          # last window ends at the newest
    assert _covered(starts, 4) == list(range(n))
    assert all(b - a == 4 for a, b in zip(starts[:-2], starts[1:-1], strict=True))
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


# -- KV reuse: ring caches (sliding-window layers) and image identity ----------------------

def _ring_contract():
    from webpte.host.turn import Contract, Ring

    return Contract(rows=4, max_context=128, sink_id=1, sink_token="<bos>",
                    stop_ids=frozenset({2}), ring=Ring(window=8, rows=16))


def _fed(starts, rows=4, ring_rows=16):
    from webpte.host.turn import RingSlots

    slots = RingSlots(ring_rows)
    for s in starts:
        slots.write(s, rows)
    return slots


def test_ring_reuse_keeps_a_prefix_only_while_the_ring_still_holds_what_it_sees():
    from webpte.host.turn import extend_starts, prefill_windows

    c = _ring_contract()
    old = [1] + list(range(10, 59))                       # 50 positions fed, ring holds 34..49
    slots = _fed(prefill_windows([], old, c)[1])
    assert slots.held == list(range(48, 50)) + list(range(34, 48))
    # Extending the conversation: the first new window (46..49 rewritten, then 50..) sees
    # positions 39..45, all still in the ring.
    assert prefill_windows(old, old + [7, 8, 9], c, slots) == (50, extend_starts(50, 53))
    # A new prompt that leaves the old one at 41 (8 positions before its end): 34..40 held.
    edit = old[:41] + [7] * 20
    assert prefill_windows(old, edit, c, slots)[0] == 41
    # Leaving it at 30: the first window would see 23..29, whose slots hold 39..45 now.
    edit = old[:30] + [7] * 20
    assert prefill_windows(old, edit, c, slots) == (0, extend_starts(0, 50))
    # Unknown slots (a turn stopped while its windows ran): only position 0 is a safe start.
    from webpte.host.turn import RingSlots

    assert prefill_windows(old, old + [7], c, RingSlots(16))[0] == 0
    # Without a ring (position-indexed caches) the token prefix alone decides.
    from dataclasses import replace

    assert prefill_windows(old, old[:30] + [7] * 20, replace(c, ring=None))[0] == 30


def test_ring_facts_are_checked():
    from webpte.host.turn import Ring, make_contract, ring_of_meta

    assert ring_of_meta({}) is None
    assert ring_of_meta({"sliding_window": 8, "ring_rows": 16}) == Ring(8, 16)
    for bad in ({"sliding_window": 8}, {"sliding_window": 8, "ring_rows": 4},
                {"sliding_window": "8", "ring_rows": 16}, {"sliding_window": 0, "ring_rows": 1}):
        with pytest.raises(InputError, match="sliding_window and ring_rows"):
            ring_of_meta(bad)
    ids = {"<bos>": 1, "<eos>": 2}.get
    with pytest.raises(InputError, match="cannot hold a 4-row window"):
        make_contract(ids, 4, 64, "<bos>", ["<eos>"], Ring(8, 10))


def test_image_identity_bounds_the_reused_prefix():
    from webpte.host.turn import image_key, reusable_prefix

    img = 9
    cached = [1, 5, img, img, img, 6, 7, 8, img, img, img, 4]
    a, b = image_key(b"a" * 12, (1, 3, 2)), image_key(b"b" * 12, (1, 3, 2))
    assert a != b and a == image_key(b"a" * 12, (1, 3, 2))
    assert a != image_key(b"a" * 12, (1, 2, 3))          # the same bytes in another shape
    assert reusable_prefix(cached, cached, [a, b], [a, b], img) == len(cached)
    assert reusable_prefix(cached, cached, [a, b], [a, a], img) == 8     # before image 2
    assert reusable_prefix(cached, cached, [a, b], [b, b], img) == 2     # before image 1
    assert reusable_prefix(cached, cached, [a], [a, b], img) == 8        # image 2 not cached
    assert reusable_prefix(cached, cached) == len(cached)                 # no image token


class _Logits:
    """A stand-in for the page's Float32Array of logits: `to_memoryview` as Pyodide's."""

    def __init__(self, vocab: int, best: int):
        import array

        self.values = array.array("f", [0.0] * vocab)
        self.values[best] = 1.0

    def to_memoryview(self):
        return memoryview(self.values)


def _page_session(ring=True):
    from webpte.web_glue import ChatSession

    vocab = {"<bos>": 1, "<end_of_turn>": 2, "<image>": 3}
    manifest = {"sink_token": "<bos>", "stop_tokens": ["<end_of_turn>"],
                "ring": {"window": 8, "rows": 16} if ring else None}
    config = json.dumps({"bos_token": "<bos>", "chat_template": (
        "{{ bos_token }}{% for m in messages %}{{ m['role'] }}:{{ m['content'] }};"
        "{% endfor %}")})
    s = ChatSession(json.dumps(manifest), config, lambda t: vocab.get(t, -1), 4, 128)
    assert "ok" in json.loads(s.setup())
    return s


def _page_turn(s, ids, image=None, tokens=(), stop_after=None):
    """Drive one page turn as model_worker.js does: begin, prefilled, step per token."""
    out = json.loads(s.begin("q", image, ids, json.dumps({"max_new_tokens": len(tokens)})))
    assert "ok" in out, out
    s.prefilled()
    for i, tok in enumerate(tokens):
        step = json.loads(s.step(_Logits(64, tok)))["ok"]
        assert step["token"] == tok
        if stop_after == i:
            break
    else:
        assert json.loads(s.step(_Logits(64, 5)))["ok"] == {"stop": "max_new_tokens"}
    s.finish("answer")
    return out["ok"]


def test_page_session_tracks_the_ring_and_image_keys_like_the_native_one():
    """web_glue.ChatSession (the page's Python) makes the host's decisions: reuse across the
    ring only while the ring holds what the first window sees, and never past an image whose
    key differs."""
    s = _page_session()
    old = [1] + list(range(10, 40))                       # 31 prompt positions
    first = _page_turn(s, old, tokens=[20] * 19)           # ring runs to 49
    assert first["reuse"] == 0
    edited = old[:30] + [21] * 6                          # leaves the old turn at 30
    assert _page_turn(s, edited, tokens=[22])["reuse"] == 0
    follow = edited + [22, 23, 24]
    assert _page_turn(s, follow)["reuse"] == len(edited) + 1
    # A turn ended by a stop sequence leaves its last token's window perhaps run, not cached.
    s = _page_session()
    _page_turn(s, old, tokens=[20] * 5, stop_after=2)
    assert _page_turn(s, old + [20, 20, 20, 25])["reuse"] == len(old) + 2
    # Images: the same ids about another picture keep only the rows before it.
    s = _page_session(ring=False)
    key_a = json.loads(s.image_key(b"\x01" * 16, 2, 2))["ok"]
    key_b = json.loads(s.image_key(b"\x02" * 16, 2, 2))["ok"]
    ids = [1, 6, 3, 3, 3, 3, 7, 8, 9]
    assert _page_turn(s, ids, key_a, tokens=[11])["images"] == [key_a]
    assert "ok" in json.loads(s.set_history("[]"))
    assert _page_turn(s, ids, key_b, tokens=[11])["reuse"] == 2
    assert "ok" in json.loads(s.set_history("[]"))
    assert _page_turn(s, ids, key_b, tokens=[11])["reuse"] == len(ids) - 1
    # A history naming the picture by key: its turn holds it, so the prompt's images follow.
    history = json.dumps([{"role": "user", "text": "q", "image": key_a},
                          {"role": "assistant", "text": "a", "image": None}])
    assert "ok" in json.loads(s.set_history(history))
    assert _page_turn(s, ids + [1, 2, 3, 3, 3, 3, 4], key_b)["images"] == [key_a, key_b]
    assert json.loads(s.set_history('[{"role": 1}]'))["error"]["name"] == "InputError"
    assert json.loads(s.begin("q", True, ids, "{}"))["error"]["name"] == "InputError"


@pytest.fixture(scope="module")
def tiny_vlm():
    from conftest import require_adapter

    require_adapter()
    from webpte.host import load_model

    return load_model(FIXTURES / "tiny_vlm")


def test_same_question_about_another_picture_does_not_reuse_its_rows(tiny_vlm, tmp_path):
    """The tiny VLM: an edited conversation asks the same question about another picture.
    The token ids are the same (64 <image> tokens either way); the image keys are not, so
    the rows from the picture on are computed again and the answer is the from-scratch one.
    The same picture again reuses everything but the newest row."""
    from PIL import Image, ImageOps

    picture = FIXTURES / "tiny_vlm" / "picture.png"
    other = tmp_path / "other.png"
    ImageOps.invert(Image.open(picture).convert("RGB")).save(other)
    question = "What is in this picture?"

    def scratch(image):
        s = tiny_vlm.session()
        s.reset()
        s.ask(question, image, max_new_tokens=6)
        return s.stats.token_ids

    want_a, want_b = scratch(picture), scratch(other)
    assert want_a != want_b, "the two pictures should give different answers"
    s = tiny_vlm.session()
    s.reset()
    s.ask(question, picture, max_new_tokens=6)
    ids = s.prompt_ids(s.turns[:1])
    before_image = ids.index(tiny_vlm.image_id)
    s.turns = []                                          # the user edits the conversation
    s.ask(question, other, max_new_tokens=6)
    assert s.stats.reused_rows == before_image and s.stats.vision_s > 0
    assert s.stats.token_ids == want_b
    s.turns = []
    s.ask(question, other, max_new_tokens=6)
    assert s.stats.reused_rows == len(ids) - 1 and s.stats.vision_s == 0
    assert s.stats.token_ids == want_b
    s.turns = [Turn("user", question, True, "not-a-key-of-this-session")]
    with pytest.raises(InputError, match="has not seen"):
        s.ask("And now?", max_new_tokens=1)


def test_position_indexed_caches_reuse_any_token_prefix_exactly(tiny_vlm):
    """SmolVLM/SmolLM2-recipe decoders index their caches by position and mask later ones,
    so rows an earlier, longer turn left past the reused prefix are never seen: the token
    prefix alone decides (no ring), and the reused logits are the from-scratch ones."""
    import numpy as np

    from webpte.host.turn import prefill_windows

    m = tiny_vlm
    assert m.contract.ring is None

    def feed(ids, starts):
        embeds = m.embeddings(ids).astype(np.float32)
        for s in starts:
            (logits,) = m.decoder.run(embeds[None, s:s + m.rows], np.array([s], np.int64))
        return logits.reshape(-1)

    old = m.chat.encode("<|im_start|>User: hi there, a long first turn that runs on and on")
    new = m.chat.encode("<|im_start|>User: hi no")
    m.decoder.reset()
    feed(old, prefill_windows([], old, m.contract)[1])
    reuse, starts = prefill_windows(old, new, m.contract)
    assert 0 < reuse < len(new) and len(old) - reuse > 40
    reused = feed(new, starts)
    m.decoder.reset()
    scratch = feed(new, prefill_windows([], new, m.contract)[1])
    np.testing.assert_array_equal(reused, scratch)
