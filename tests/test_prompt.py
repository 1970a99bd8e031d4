"""Prompts: chat templates and tokenization with hand-checked ids.

Uses the tokenizer of the SmolLM2 model folder (`webpte build smollm2`), and a SmolVLM-style
tokenizer made from it by adding SmolVLM's special tokens.
"""

from __future__ import annotations

import json

import pytest

from webpte.errors import InputError
from webpte.host.prompt import IMAGE_ROWS, ChatFormat, Turn

SMOLVLM_SPECIALS = ["<fake_token_around_image>", "<global-img>", "<image>", "<end_of_utterance>"]


@pytest.fixture(scope="module")
def smollm2_tokenizer_dir():
    from webpte.build.smollm2 import default_folder, is_complete

    folder = default_folder()
    if not is_complete(folder):
        pytest.skip(f"{folder} is not built (`webpte build smollm2`, or `make model`)")
    return folder / "tokenizer"


@pytest.fixture(scope="module")
def smolvlm_style_dir(smollm2_tokenizer_dir, tmp_path_factory):
    """SmolLM2's vocabulary plus the SmolVLM special tokens, with no chat_template (so the
    built-in SmolVLM format is used)."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_file(str(smollm2_tokenizer_dir / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in SMOLVLM_SPECIALS])
    out = tmp_path_factory.mktemp("smolvlm_tok")
    tok.save(str(out / "tokenizer.json"))
    cfg = json.loads((smollm2_tokenizer_dir / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (out / "tokenizer_config.json").write_text(json.dumps(cfg))
    return out


def test_smollm2_template_ids(smollm2_tokenizer_dir):
    chat = ChatFormat(smollm2_tokenizer_dir)
    text = chat.render([Turn("user", "What is the capital of France?")])
    assert text == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                    "Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?"
                    "<|im_end|>\n<|im_start|>assistant\n")
    enc = chat.tokenizer.encode(text, add_special_tokens=False)
    # Checked by hand against the vocabulary ('Ġ' is a leading space, 'Ċ' a newline).
    assert list(zip(enc.tokens, enc.ids, strict=True)) == [
        ("<|im_start|>", 1), ("system", 9690), ("Ċ", 198), ("You", 2683), ("Ġare", 359),
        ("Ġa", 253), ("Ġhelpful", 5356), ("ĠAI", 5646), ("Ġassistant", 11173),
        ("Ġnamed", 3365), ("ĠSm", 3511), ("ol", 308), ("LM", 34519), (",", 28),
        ("Ġtrained", 7018), ("Ġby", 411), ("ĠH", 407), ("ugging", 19712), ("ĠFace", 8182),
        ("<|im_end|>", 2), ("Ċ", 198), ("<|im_start|>", 1), ("user", 4093), ("Ċ", 198),
        ("What", 1780), ("Ġis", 314), ("Ġthe", 260), ("Ġcapital", 3575), ("Ġof", 282),
        ("ĠFrance", 4649), ("?", 47), ("<|im_end|>", 2), ("Ċ", 198), ("<|im_start|>", 1),
        ("ass", 520), ("istant", 9531), ("Ċ", 198)]
    assert chat.encode(text) == enc.ids


def test_smollm2_multi_turn_and_system(smollm2_tokenizer_dir):
    chat = ChatFormat(smollm2_tokenizer_dir)
    text = chat.render([Turn("system", "Be brief."), Turn("user", "Hi"),
                        Turn("assistant", "Hello!"), Turn("user", "Bye")])
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
                    "<|im_start|>assistant\n")
    with pytest.raises(InputError, match="takes no images"):
        chat.render([Turn("user", "What is this?", image=True)])


def test_smolvlm_single_image_prompt(smolvlm_style_dir):
    chat = ChatFormat(smolvlm_style_dir)
    ids_of = {t: chat.token_id(t) for t in SMOLVLM_SPECIALS}
    assert sorted(ids_of.values()) == list(range(49152, 49156))
    text = chat.render([Turn("user", "What animal is this?", image=True)])
    assert text == ("<|im_start|>User:<fake_token_around_image><global-img>"
                    + "<image>" * IMAGE_ROWS
                    + "<fake_token_around_image>What animal is this?<end_of_utterance>\n"
                      "Assistant:")
    enc = chat.tokenizer.encode(text, add_special_tokens=False)
    fake, glob, img, eou = (ids_of[t] for t in SMOLVLM_SPECIALS)
    # Checked by hand: SmolLM2's merges split "Assistant" into "Ass" + "istant", so this
    # tokenizer gives 80 rows where the architecture notes give 79 for SmolVLM's own.
    assert list(zip(enc.tokens[:5], enc.ids[:5], strict=True)) == [
        ("<|im_start|>", 1), ("User", 11126), (":", 42), ("<fake_token_around_image>", fake),
        ("<global-img>", glob)]
    assert enc.ids[5:5 + IMAGE_ROWS] == [img] * IMAGE_ROWS
    assert list(zip(enc.tokens[5 + IMAGE_ROWS:], enc.ids[5 + IMAGE_ROWS:], strict=True)) == [
        ("<fake_token_around_image>", fake), ("What", 1780), ("Ġanimal", 3161), ("Ġis", 314),
        ("Ġthis", 451), ("?", 47), ("<end_of_utterance>", eou), ("Ċ", 198), ("Ass", 9519),
        ("istant", 9531), (":", 42)]
    assert len(enc.ids) == 80
    assert chat.encode(" This is a cat.<end_of_utterance>")[-1] == eou


def test_smolvlm_follow_up_keeps_the_image_turn(smolvlm_style_dir):
    chat = ChatFormat(smolvlm_style_dir)
    text = chat.render([Turn("user", "What animal is this?", image=True),
                        Turn("assistant", "A cat."), Turn("user", "What colour is it?")])
    assert text.count("<image>") == IMAGE_ROWS
    assert text.endswith("<end_of_utterance>\nAssistant: A cat.<end_of_utterance>\n"
                         "User: What colour is it?<end_of_utterance>\nAssistant:")
