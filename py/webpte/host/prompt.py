"""Prompts: the model's own chat template (sandboxed jinja2) and tokenizer.

SmolVLM's single-image expansion: each `<image>` the template emits becomes
`<fake_token_around_image><global-img>` + 64 x `<image>` + `<fake_token_around_image>`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import InputError, WebpteError

IMAGE_TOKEN = "<image>"
FAKE_AROUND = "<fake_token_around_image>"
GLOBAL_IMG = "<global-img>"
IMAGE_ROWS = 64

# Our own rendering of SmolVLM's chat format, used when tokenizer_config.json has no
# chat_template: "<|im_start|>User:<image>question<end_of_utterance>\nAssistant: answer..."
SMOLVLM_TEMPLATE = (
    "<|im_start|>"
    "{% for m in messages %}"
    "{{ m['role'] | capitalize }}"
    "{{ ':' if m['content'] and m['content'][0]['type'] == 'image' else ': ' }}"
    "{% for part in m['content'] %}"
    "{{ '<image>' if part['type'] == 'image' else part['text'] }}"
    "{% endfor %}<end_of_utterance>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)


class TemplateError(WebpteError):
    """The model's chat template failed to render."""


@dataclass(frozen=True)
class Turn:
    role: str            # "user" | "assistant" | "system"
    text: str
    image: bool = False  # a user turn with one image before its text
    image_key: str | None = None  # that image's identity (turn.image_key), compared for reuse


def _raise(message):
    raise TemplateError(f"chat template: {message}")


class ChatTemplate:
    """Renders conversations with the model's chat template (sandboxed jinja2).

    Needs no tokenizer, so the page (Pyodide) renders prompts with it and tokenizes in JS.
    `config` is tokenizer_config.json; `has_images` says whether the tokenizer has `<image>`.
    """

    def __init__(self, config: dict, *, has_images: bool, image_rows: int = IMAGE_ROWS,
                 source: str = "tokenizer_config.json"):
        self.config = config
        template = config.get("chat_template")
        if isinstance(template, list):  # named templates: take "default"
            template = next((t.get("template") for t in template
                             if isinstance(t, dict) and t.get("name") == "default"), None)
        self.has_images = has_images
        if template is None:
            if not has_images:
                raise TemplateError(f"{source} has no chat_template")
            template = SMOLVLM_TEMPLATE
        if not isinstance(template, str):
            raise TemplateError(f"{source}: chat_template is not a string")
        self.list_content = "['type']" in template or '["type"]' in template
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        try:
            self.template = env.from_string(template)
        except Exception as e:  # the template is data from the model folder
            raise TemplateError(f"{source}: chat_template does not parse: {e}") from e
        self.image_rows = image_rows

    def render(self, turns: list[Turn], add_generation_prompt: bool = True) -> str:
        messages = []
        for t in turns:
            if t.image and not self.has_images:
                raise InputError("this model takes no images (its tokenizer has no <image>)")
            if self.list_content:
                content = ([{"type": "image"}] if t.image else []) + [
                    {"type": "text", "text": t.text}]
            else:
                content = t.text
            messages.append({"role": t.role, "content": content})
        try:
            text = self.template.render(messages=messages,
                                        add_generation_prompt=add_generation_prompt,
                                        bos_token=self.config.get("bos_token", ""),
                                        eos_token=self.config.get("eos_token", ""))
        except TemplateError:
            raise
        except Exception as e:  # the template is data from the model folder
            raise TemplateError(f"chat template failed: {e}") from e
        return self.expand_images(text)

    def expand_images(self, text: str) -> str:
        if not self.has_images:
            return text
        expanded = FAKE_AROUND + GLOBAL_IMG + IMAGE_TOKEN * self.image_rows + FAKE_AROUND
        return text.replace(IMAGE_TOKEN, expanded)


class ChatFormat(ChatTemplate):
    """Renders conversations with the model's template and tokenizes them (Rust `tokenizers`)."""

    def __init__(self, tokenizer_dir: str | Path, *, image_rows: int = IMAGE_ROWS):
        from tokenizers import Tokenizer

        tokenizer_dir = Path(tokenizer_dir)
        self.tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
        cfg_path = tokenizer_dir / "tokenizer_config.json"
        config = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        super().__init__(config, image_rows=image_rows, source=str(cfg_path),
                         has_images=self.token_id(IMAGE_TOKEN, required=False) is not None)

    def token_id(self, token: str, required: bool = True) -> int | None:
        tid = self.tokenizer.token_to_id(token)
        if tid is None and required:
            raise InputError(f"the tokenizer has no token {token!r}")
        return tid

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)
