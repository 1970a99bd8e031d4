"""The image path end to end on the tiny VLM model folder (tests/fixtures/tiny_vlm, made by
tools/export_tiny_vlm.py): picture -> pixel values -> q8 vision program -> 64 image rows
spliced over the prompt's <image> tokens -> windowed q8 decoder -> greedy tokens, natively.

References: eager PyTorch outputs of the same q8 modules (eager_reference.npz; rel-L2 2e-3, as
for every int8 program: rounding ties differ) and webpte's numpy interpreter of the programs
(expected.json; exact greedy ids). The reference-backend test needs no GPU.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness import assert_close
from webpte.errors import InputError
from webpte.host import load_model
from webpte.host.image import preprocess_image
from webpte.testing import greedy_conversation

FOLDER = Path(__file__).parent / "fixtures" / "tiny_vlm"
PICTURE = FOLDER / "picture.png"
EXPECTED = json.loads((FOLDER / "expected.json").read_text())
EAGER = np.load(FOLDER / "eager_reference.npz")
Q8_REL = 2e-3
N_NEW = max(len(a) for a in EXPECTED["answer_ids"])


@pytest.fixture(scope="module")
def vlm(request):
    from conftest import require_adapter

    require_adapter()
    return load_model(FOLDER)


def test_folder_facts(vlm):
    assert vlm.vision is not None and vlm.image_size == (512, 512)
    assert vlm.chat.image_rows == 64 and vlm.hidden == 64 and vlm.rows == 4
    assert vlm.max_context == 256 and vlm.vocab == vlm.embeddings.vocab == 264
    assert vlm.sink_id == vlm.chat.token_id("<|im_start|>")
    assert vlm.stop_ids == {vlm.chat.token_id("<end_of_utterance>")}
    assert vlm.image_id == vlm.chat.token_id("<image>")


def test_pixel_values_of_the_picture():
    """Pillow decode of the committed PNG gives exactly the pixel values eager PyTorch saw."""
    np.testing.assert_array_equal(preprocess_image(PICTURE, (512, 512)), EAGER["pixel_values"])


def test_vision_program_matches_eager_and_numpy(vlm):
    from webpte.kernels.reference import run_reference

    (embeds,) = vlm.vision.run(EAGER["pixel_values"])
    assert embeds.shape == (1, 64, 64)
    assert_close(embeds, EAGER["image_embeds"], rel=Q8_REL, what="image embeddings vs eager")
    m = vlm.vision.program.method("forward")
    env = run_reference(m.graph, {m.input_value_ids()[0]: EAGER["pixel_values"]},
                        vlm.vision.data)
    assert_close(embeds, env.get(m.output_value_ids()[0]), rel=1e-4,
                 what="image embeddings vs numpy")


def test_first_answer_logits_match_eager(vlm):
    """The prompt with the picture, fed as the Session feeds it, gives eager's logits for the
    first answer token."""
    session = vlm.session()
    session.ask(EXPECTED["questions"][0], PICTURE, max_new_tokens=1)
    ids = EXPECTED["prompt_ids"][0]
    assert ids == EAGER["prompt_ids"].tolist()
    # The decoder's last output is the logits of the newest row: recompute the last window.
    from webpte.host.turn import prefill_windows

    _, starts = prefill_windows([], ids, vlm.contract)
    (logits,) = vlm.decoder.run(session._embed(ids)[None, starts[-1]:starts[-1] + 4]
                                .astype(np.float32), np.array([starts[-1]], np.int64))
    assert_close(logits, EAGER["first_logits"], rel=Q8_REL, what="first answer logits vs eager")
    assert int(logits.argmax()) == int(EAGER["first_logits"].argmax())
    assert session.stats.token_ids == [int(EAGER["first_logits"].argmax())]


def test_gpu_conversation_equals_the_numpy_interpreter(vlm):
    """Greedy ids of a two-turn conversation about the picture, on the GPU, equal those of
    webpte's numpy interpreter (same int8 arithmetic), and the follow-up reuses the cache."""
    got = greedy_conversation(vlm, EXPECTED["questions"], PICTURE, N_NEW)
    assert got["prompt_ids"] == EXPECTED["prompt_ids"]
    assert got["answer_ids"] == EXPECTED["answer_ids"]
    assert got["reused_rows"] == EXPECTED["reused_rows"]
    first, second = (len(p) for p in got["prompt_ids"])
    assert got["reused_rows"][1] >= first, "the follow-up recomputed the image turn"
    assert got["computed_rows"][1] <= second - got["reused_rows"][1] + 3


def test_numpy_interpreter_still_gives_expected_json():
    """expected.json is what the reference backend computes today (it cannot go stale)."""
    model = load_model(FOLDER, backend="reference")
    got = greedy_conversation(model, EXPECTED["questions"], PICTURE, N_NEW)
    assert got == EXPECTED


def test_the_image_goes_with_its_turn_only(vlm):
    session = vlm.session()
    session.ask("Describe it.", PICTURE.read_bytes(), max_new_tokens=2)
    assert len(session.images) == 1 and session.stats.vision_s > 0
    session.ask("Thanks.", max_new_tokens=2)
    assert len(session.images) == 1 and session.stats.vision_s == 0
    ids = session.prompt_ids(session.turns[:-1])
    assert ids.count(vlm.image_id) == 64
    # A second picture adds its own 64 rows; both stay spliced in order.
    session.ask("And this one?", PICTURE, max_new_tokens=2)
    assert len(session.images) == 2
    assert session.prompt_ids(session.turns[:-1]).count(vlm.image_id) == 128


def test_pictures_of_other_sizes_are_resized(vlm, tmp_path):
    from PIL import Image

    small = tmp_path / "small.jpg"
    Image.open(PICTURE).resize((97, 61)).save(small)
    x = preprocess_image(small, vlm.image_size)
    assert x.shape == (1, 3, 512, 512) and x.dtype == np.float32
    assert -1.0 <= x.min() and x.max() <= 1.0
    session = vlm.session()
    session.ask("What is this?", small, max_new_tokens=2)
    assert session.stats.new_tokens + (session.stats.stop_reason == "stop_token") >= 1


def test_unreadable_picture_is_an_input_error_and_loses_nothing(vlm, tmp_path):
    session = vlm.session()
    session.ask("Hello?", max_new_tokens=2)
    turns, cached = list(session.turns), list(session.cached)
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    with pytest.raises(InputError, match="not a readable image"):
        session.ask("What is this?", bad, max_new_tokens=2)
    assert session.turns == turns and session.cached == cached and session.images == []


def test_vision_program_that_does_not_fit_the_decoder_is_refused(gpu, tmp_path):
    """A vision program whose embeddings are not decoder-wide fails at load, saying why."""
    folder = tmp_path / "mismatch"
    shutil.copytree(FOLDER, folder)
    shutil.copy(FOLDER.parent / "vision_q8_tiny.pte", folder / "vision_q8.pte")
    with pytest.raises(InputError, match=r"gives float32\[1, 4, 48\]; the decoder takes "
                                         r"\[1, rows, 64\]"):
        load_model(folder, verify=False)


def test_the_answer_depends_on_the_picture(vlm):
    """The fixture can tell pictures apart: a mirrored picture changes the greedy answer (so
    the page test notices a picture that went wrong on the way)."""
    from PIL import Image, ImageOps

    mirrored = ImageOps.mirror(Image.open(PICTURE))
    got = greedy_conversation(vlm, EXPECTED["questions"][:1], mirrored, N_NEW)
    assert got["prompt_ids"][0] == EXPECTED["prompt_ids"][0]
    assert got["answer_ids"][0] != EXPECTED["answer_ids"][0]


def test_the_published_smolvlm_layout_runs_end_to_end(gpu, tmp_path, monkeypatch):
    """The tiny VLM's files under the published SmolVLM names (smolvlm-files.md), with the
    pinned sizes and sha256 values swapped for the tiny files' own: the SmolVLM layout path
    (recognition, size + hash checks, vlm_meta.json, `<end_of_utterance>` stops) answers like
    the webpte layout does."""
    import webpte.host.files as files

    names = {"smolvlm_vision_q8.pte": "vision_q8.pte", "smolvlm_decoder_q8.pte": "decoder_q8.pte",
             "embed_tokens.i8.bin": "embed_tokens.i8.bin",
             "embed_tokens.scale.f32.bin": "embed_tokens.scale.f32.bin",
             "tokenizer/tokenizer.json": "tokenizer/tokenizer.json",
             "tokenizer/tokenizer_config.json": "tokenizer/tokenizer_config.json"}
    (tmp_path / "tokenizer").mkdir()
    for published, ours in names.items():
        shutil.copy(FOLDER / ours, tmp_path / published)
    (tmp_path / "tokenizer" / "special_tokens_map.json").write_text("{}")
    (tmp_path / "vlm_meta.json").write_text(json.dumps({"hidden_size": 64}))
    pinned = {name: ((tmp_path / name).stat().st_size, files.sha256_file(tmp_path / name))
              for name in files.SMOLVLM_FILES}
    assert set(pinned) == set(names) | {"vlm_meta.json", "tokenizer/special_tokens_map.json"}
    monkeypatch.setattr(files, "SMOLVLM_FILES", pinned)
    model = load_model(tmp_path)
    assert model.files.layout == "smolvlm" and model.image_size == (512, 512)
    got = greedy_conversation(model, EXPECTED["questions"], PICTURE, N_NEW)
    assert got == EXPECTED
    # One flipped byte in the decoder is refused before anything runs.
    data = bytearray((tmp_path / "smolvlm_decoder_q8.pte").read_bytes())
    data[-1] ^= 1
    (tmp_path / "smolvlm_decoder_q8.pte").write_bytes(bytes(data))
    with pytest.raises(files.ModelFolderError, match="smolvlm_decoder_q8.pte does not match"):
        load_model(tmp_path)
