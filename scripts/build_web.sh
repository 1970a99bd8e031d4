#!/usr/bin/env bash
# Build dist/: the web front end (web/*.js), the Pyodide core (from node_modules/pyodide),
# the wheels the worker installs (webpte, jinja2, markupsafe, flatbuffers) and their lock
# file, and the tokenizer library (@huggingface/tokenizers, one dependency-free ES module, in
# dist/vendor/). Everything is local: a static server can host dist/ with no CDN. dist/ is also
# what the npm package ships (package.json `files`), with the declarations in types/.
set -euo pipefail
cd "$(dirname "$0")/.."

DIST=dist
CACHE=build/web-wheels            # third-party wheels, kept between builds
WEB_VENV=${WEB_VENV:-.venv-web}   # pyodide-build (needs Python >= 3.12), build, hatchling
JINJA2=3.1.6
MARKUPSAFE=3.0.3
FLATBUFFERS=25.12.19
PYODIDE_BUILD=0.39.2

# The npm package and the Python package carry one version.
PY_VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
NPM_VERSION=$(node -p 'require("./package.json").version')
if [ "$PY_VERSION" != "$NPM_VERSION" ]; then
  echo "build_web: package.json is version $NPM_VERSION, pyproject.toml $PY_VERSION; keep them in step" >&2
  exit 1
fi

find_python() {
  for cand in "${WEB_PY:-}" python3.13 python3.12 \
              "$HOME"/.pyenv/versions/3.13*/bin/python3 "$HOME"/.pyenv/versions/3.12*/bin/python3; do
    [ -n "$cand" ] || continue
    if "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      echo "$cand"; return 0
    fi
  done
  echo "build_web: no Python >= 3.12 found (pyodide-build needs it); set WEB_PY" >&2
  return 1
}

if [ ! -x "$WEB_VENV/bin/pyodide" ]; then
  PY=$(find_python)
  "$PY" -m venv "$WEB_VENV"
  "$WEB_VENV/bin/pip" install -q --upgrade pip
  "$WEB_VENV/bin/pip" install -q "pyodide-build==$PYODIDE_BUILD" build pkginfo hatchling setuptools wheel
fi
TOKENIZERS=node_modules/@huggingface/tokenizers
[ -f node_modules/pyodide/pyodide.mjs ] && [ -f "$TOKENIZERS/dist/tokenizers.mjs" ] ||
  npm ci --no-audit --no-fund

mkdir -p "$CACHE"
# Pure wheels from PyPI; MarkupSafe from its sdist with the C speedups off (CC=false),
# which yields a py3-none-any wheel that Pyodide installs as is.
[ -n "$(ls "$CACHE"/jinja2-$JINJA2-*.whl 2>/dev/null)" ] ||
  "$WEB_VENV/bin/pip" download -q --no-deps --only-binary :all: -d "$CACHE" "jinja2==$JINJA2"
[ -n "$(ls "$CACHE"/flatbuffers-$FLATBUFFERS-*.whl 2>/dev/null)" ] ||
  "$WEB_VENV/bin/pip" download -q --no-deps --only-binary :all: -d "$CACHE" \
    "flatbuffers==$FLATBUFFERS"
if [ -z "$(ls "$CACHE"/markupsafe-$MARKUPSAFE-py3-none-any.whl 2>/dev/null)" ]; then
  CC=false "$WEB_VENV/bin/pip" wheel -q --no-deps --no-binary markupsafe -w "$CACHE" \
    "markupsafe==$MARKUPSAFE"
fi

rm -rf "$DIST"
mkdir -p "$DIST/pyodide" "$DIST/wheels" "$DIST/vendor"
"$WEB_VENV/bin/python" -m build -q --wheel --no-isolation --outdir "$DIST/wheels" . >/dev/null
cp "$CACHE"/jinja2-$JINJA2-*.whl "$CACHE"/flatbuffers-$FLATBUFFERS-*.whl \
   "$CACHE"/markupsafe-$MARKUPSAFE-py3-none-any.whl "$DIST/wheels/"

# Lock file: the core's platform info, no packages, plus our wheels.
"$WEB_VENV/bin/python" scripts/web_lock.py base node_modules/pyodide/pyodide-lock.json \
  build/web-lock-base.json
"$WEB_VENV/bin/pyodide" lockfile add-wheels --ignore-missing-dependencies \
  --input build/web-lock-base.json --output "$DIST/wheels/pyodide-lock.json" \
  --base-path "$DIST/wheels" "$DIST"/wheels/*.whl >/dev/null
"$WEB_VENV/bin/python" scripts/web_lock.py check "$DIST/wheels/pyodide-lock.json"

for f in pyodide.mjs pyodide.asm.mjs pyodide.asm.wasm python_stdlib.zip; do
  cp "node_modules/pyodide/$f" "$DIST/pyodide/"
done
cp web/*.js "$DIST/"
# web/assets.js names every wheel by a literal URL (bundlers must see the names): check it.
LISTED=$(grep -o "new URL('./wheels/[^']*\.whl'" web/assets.js | sed "s|new URL('./wheels/||; s|'$||" | sort)
BUILT=$(cd "$DIST/wheels" && ls *.whl | sort)
if [ "$LISTED" != "$BUILT" ]; then
  echo "build_web: web/assets.js lists the wheels" $LISTED "but dist/wheels/ holds" $BUILT "; update web/assets.js" >&2
  exit 1
fi
npm run -s types
cp "$TOKENIZERS/dist/tokenizers.mjs" "$DIST/vendor/tokenizers.mjs"
cp "$TOKENIZERS/LICENSE" "$DIST/vendor/tokenizers.LICENSE"
echo "built $DIST/: $(du -sh "$DIST" | cut -f1), wheels: $(cd "$DIST/wheels" && ls *.whl | tr '\n' ' ')"
