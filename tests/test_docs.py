"""Tier 0: the docs stay true to the code. Every relative link and anchor in the README, docs/
and examples/ resolves; every flag of every `webpte` command is in docs/cli.md (in its
command's section); every export of the npm package (web/index.js, and types/index.d.ts
agrees) is in docs/javascript-api.md; every public Python name is in docs/python-api.md; every
`make` target the docs name exists; and no file speaks of earlier work periods."""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", *DOCS.glob("*.md"), *(ROOT / "examples").glob("*/README.md")])

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """Markdown without its code blocks and inline code (links there are not links)."""
    return _CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in _HEADING.findall(_FENCE.sub("", page.read_text())):
        s = slug(h)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def test_every_page_is_checked():
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "docs/cli.md", "docs/javascript-api.md", "docs/python-api.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_and_anchors_resolve(page):
    broken = []
    for target in _LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):   # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file or folder ({dest})")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
        elif anchor and dest.suffix != ".md":
            broken.append(f"{target}: an anchor into a file that is not Markdown")
    assert not broken, f"{page.relative_to(ROOT)}:\n  " + "\n  ".join(broken)


def test_slug_follows_github():
    assert slug("webpte run") == "webpte-run"
    assert slug("`loadModel(source, options?) -> Promise<Model>`") == (
        "loadmodelsource-options---promisemodel")
    assert slug("Model folders and the host contract") == "model-folders-and-the-host-contract"


def _sections(text: str, level: str = "## ") -> dict[str, str]:
    """Text under each heading of `level`, by heading."""
    out, name = {}, None
    for line in text.splitlines():
        if line.startswith(level):
            name = line[len(level):].strip()
            out[name] = ""
        elif name is not None:
            out[name] += line + "\n"
    return out


def _commands() -> dict[str, argparse.ArgumentParser]:
    from webpte.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_cli_flag_is_documented_in_its_section():
    sections = _sections((DOCS / "cli.md").read_text())
    missing = []
    for name, parser in _commands().items():
        section = sections.get(f"webpte {name}")
        if section is None:
            missing.append(f"no section '## webpte {name}'")
            continue
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            words = action.option_strings or [action.dest.upper()]
            missing += [f"webpte {name} {w}" for w in words if f"`{w}" not in section]
    assert not missing, "docs/cli.md lacks:\n  " + "\n  ".join(missing)


def _js_exports(text: str) -> set[str]:
    names = set()
    for block in re.findall(r"^export\s*\{([^}]*)\}", text, re.M):
        names |= {n.split(" as ")[-1].strip() for n in block.split(",") if n.strip()}
    names |= set(re.findall(r"^export\s+(?:async\s+)?(?:function\*?|class|const|let)\s+(\w+)",
                            text, re.M))
    return names


def test_every_js_export_is_documented():
    exports = _js_exports((ROOT / "web" / "index.js").read_text())
    assert {"loadModel", "loadProgram", "Program", "WebpteError"} <= exports
    doc = (DOCS / "javascript-api.md").read_text()
    missing = sorted(n for n in exports if f"`{n}" not in doc)
    assert not missing, f"docs/javascript-api.md does not name {missing}"


# (file, the start of a signature whose options object the docs must cover)
_JS_OPTIONS = [("web/index.js", "export async function loadProgram("),
               ("web/model.js", "export async function loadModel("),
               ("web/model.js", "async *generate(")]


def test_every_js_option_is_documented():
    doc = (DOCS / "javascript-api.md").read_text()
    missing = []
    for file, start in _JS_OPTIONS:
        text = (ROOT / file).read_text()
        at = text.index(start)
        options = text[text.index("{", at):text.index("}", at)]
        names = re.findall(r"(\w+)\s*(?:=[^,]*)?(?:,|$)", options.strip("{ \n"))
        assert names, f"no options read from {file} {start}"
        missing += [f"{start} {n}" for n in names if f"`{n}" not in doc]
    assert not missing, "docs/javascript-api.md lacks options:\n  " + "\n  ".join(missing)


def test_every_chat_request_field_is_documented():
    text = (ROOT / "web" / "chat.js").read_text()
    fields = re.findall(r"'(\w+)'", re.search(r"const TAKEN = new Set\(\[(.*?)\]\)", text,
                                              re.S).group(1))
    assert "messages" in fields and "stream" in fields
    doc = (DOCS / "javascript-api.md").read_text()
    missing = sorted(f for f in fields if f"`{f}" not in doc)
    assert not missing, f"docs/javascript-api.md does not name the chat fields {missing}"


def test_the_type_declarations_export_what_the_package_does():
    declared = _js_exports((ROOT / "types" / "index.d.ts").read_text())
    assert declared == _js_exports((ROOT / "web" / "index.js").read_text()), (
        "types/index.d.ts differs from web/index.js: run `npm run types`")


def test_every_public_python_name_is_documented():
    import webpte
    import webpte.host

    doc = (DOCS / "python-api.md").read_text()
    names = {n for mod in (webpte, webpte.host) for n in mod.__all__}
    missing = sorted(n for n in names if not re.search(rf"\b{re.escape(n)}\b", doc))
    assert not missing, f"docs/python-api.md does not name {missing}"


def _documented_callables():
    """(name as the docs write it, callable) of the Python API's entry points."""
    import webpte
    import webpte.host
    from webpte.host.session import Session
    from webpte.program import plan_method

    return [("load", webpte.load), ("inspect", webpte.inspect),
            ("load_model", webpte.host.load_model), ("Session.generate", Session.generate),
            ("Session.ask", Session.ask), ("SamplingOptions", webpte.host.SamplingOptions),
            ("window_starts", webpte.host.window_starts), ("plan_method", plan_method)]


def test_documented_signatures_name_every_parameter():
    import inspect

    lines = (DOCS / "python-api.md").read_text().splitlines()
    problems = []
    for name, fn in _documented_callables():
        row = next((line for line in lines if f"`{name}(" in line), None)
        if row is None:
            problems.append(f"no `{name}(...)` in docs/python-api.md")
            continue
        params = [p for p in inspect.signature(fn).parameters if p not in ("self", "kw")]
        problems += [f"{name}: parameter {p} is not in its row" for p in params
                     if not re.search(rf"\b{p}\b", row)]
    assert not problems, "\n".join(problems)


def _python_blocks():
    """Every ```python block of the pages, as pytest params named by page and line."""
    out = []
    for page in PAGES:
        text = page.read_text()
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
            line = text[:m.start()].count("\n") + 1
            out.append(pytest.param(m.group(1), id=f"{page.relative_to(ROOT)}:{line}"))
    return out


@pytest.mark.parametrize("code", _python_blocks())
def test_python_snippets_run(code, gpu, monkeypatch):
    """Each block runs as it is from the repository root (a block that loads a built model
    folder, e.g. `make model`'s SmolLM2, runs when that folder is there)."""
    absent = [p for p in re.findall(r"[\"'](~/[^\"']+)[\"']", code)
              if not Path(p).expanduser().exists()]
    if absent:
        pytest.skip(f"not built here: {', '.join(absent)}")
    monkeypatch.chdir(ROOT)
    exec(compile(code, "<docs>", "exec"), {"__name__": "docs_snippet"})


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.M))
    for phony in re.findall(r"^\.PHONY:\s*(.*)$", text, re.M):
        targets |= set(phony.split())
    return targets


def _code(text: str) -> str:
    """The code blocks and inline code of a Markdown text."""
    blocks = [m.group(0) for m in _FENCE.finditer(text)]
    return "\n".join(blocks + _CODE.findall(_FENCE.sub("", text)))


def test_make_targets_named_in_the_docs_exist():
    targets = _make_targets()
    named = {(p.relative_to(ROOT).as_posix(), t) for p in PAGES
             for t in re.findall(r"\bmake ([a-z][\w-]*)", _code(p.read_text()))}
    assert ("README.md", "demo") in named and ("README.md", "test") in named
    missing = sorted(f"{page}: make {t}" for page, t in named if t not in targets)
    assert not missing, "\n".join(missing)


# Wording about the project's own history of work periods or machines belongs in git log.
_HISTORY = re.compile(r"\bsessions? \d+\b|\b(previous|earlier|last|next) session\b"
                      r"|\bsession's (first|last|machine)\b", re.I)
_TEXT = {".md", ".py", ".js", ".mjs", ".ts", ".j2", ".toml", ".sh", ".html", ".css", ".txt"}


def test_no_file_speaks_of_earlier_work_periods():
    try:
        files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                               cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout: {e}")
    hits = []
    for name in files.splitlines():
        path = ROOT / name
        if not (path.suffix in _TEXT or path.name in ("Makefile", "run")) or not path.is_file():
            continue
        for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _HISTORY.search(line):
                hits.append(f"{name}:{i}: {line.strip()[:100]}")
    assert not hits, "history belongs in git log:\n  " + "\n  ".join(hits)
