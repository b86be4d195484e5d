# One entry point for the README, .ci/run and developers alike.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-deps install demo demo-claude-code demo-codex demo-opencode demo-gemini-cli demo-sweep demo-copilot-cli test test-fast test-image check bench clean

# Debian packages the product and its tests run against: a real redis-server, bubblewrap, git,
# chromium for the HTML report's browser test, and ripgrep (OpenCode's file and skill tools run it).
system-deps:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v git >/dev/null || missing="$$missing git"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	command -v rg >/dev/null || missing="$$missing ripgrep"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; \
	fi

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

# The real agent harnesses, exact pinned versions, in a git-ignored cache inside the checkout
# (found there by the harness executors when neither PATH nor SKILL_EVAL_*_BIN names them).
# Claude Code's postinstall must run: without it bin/claude.exe stays a placeholder.
# Copilot CLI unpacks its package on its first start: the version check unpacks it into the cache,
# not into the HOME of whoever runs make.
HARNESS_CACHE  := .harness-cache
CLAUDE_CODE    := @anthropic-ai/claude-code@2.1.328
CODEX          := @openai/codex@0.169.0
OPENCODE       := opencode-ai@1.18.33
GEMINI_CLI     := @google/gemini-cli@0.61.0
COPILOT_CLI    := @github/copilot@1.0.102
HARNESS_STAMP  := $(HARNESS_CACHE)/.installed-2.1.328-0.169.0-oc1.18.33-gc0.61.0-cp1.0.102

$(HARNESS_STAMP):
	mkdir -p $(HARNESS_CACHE)
	npm install --prefix $(HARNESS_CACHE) --no-audit --no-fund --foreground-scripts $(CLAUDE_CODE) $(CODEX) $(OPENCODE) $(GEMINI_CLI) $(COPILOT_CLI)
	$(HARNESS_CACHE)/node_modules/.bin/claude --version >/dev/null 2>&1 || \
	  (cd $(HARNESS_CACHE)/node_modules/@anthropic-ai/claude-code && node install.cjs)
	$(HARNESS_CACHE)/node_modules/.bin/claude --version
	$(HARNESS_CACHE)/node_modules/.bin/codex --version
	$(HARNESS_CACHE)/node_modules/.bin/opencode --version
	$(HARNESS_CACHE)/node_modules/.bin/gemini --version
	COPILOT_OFFLINE=true COPILOT_PKG_CACHE_HOME=$(HARNESS_CACHE)/copilot-pkg $(HARNESS_CACHE)/node_modules/.bin/copilot --version
	touch $@

# The project's own modules, byte-compiled: the install is editable, so pip compiled only the
# dependencies, and where PYTHONDONTWRITEBYTECODE is set (some CI images and sandboxes set it)
# every command and worker process would compile them from source again, a few tenths of a
# second before each run's first model call. Quick when nothing changed.
PACKAGES := schemas engine harnesses producer worker reducer prompts testkit viewer

setup: system-deps $(STAMP) $(HARNESS_STAMP)
	$(BIN)/python -m compileall -q $(PACKAGES) >/dev/null

# Put `skill-eval` on PATH: a link in $(BINDIR) to the checkout's .venv/bin/skill-eval (which
# runs with the venv's Python wherever it is called from). `make install BINDIR=/usr/local/bin`
# for another folder; removing the link uninstalls.
BINDIR ?= $(HOME)/.local/bin

install: setup
	mkdir -p "$(BINDIR)"
	ln -sfn "$(abspath $(BIN))/skill-eval" "$(BINDIR)/skill-eval"
	@echo "installed: $(BINDIR)/skill-eval -> $(abspath $(BIN))/skill-eval"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; \
	  *) echo "note: $(BINDIR) is not on PATH; add it: export PATH=\"$(BINDIR):\$$PATH\"" ;; esac

# The main job: evaluate the bundled example repo.
demo: setup
	$(BIN)/python -m producer.commands.demo

# The same with the real Claude Code binary as the executor (scripted Anthropic-API model).
demo-claude-code: setup
	$(BIN)/python -m producer.commands.demo --executor claude-code

demo-codex: setup
	$(BIN)/python -m producer.commands.demo --executor codex

demo-opencode: setup
	$(BIN)/python -m producer.commands.demo --executor opencode

demo-gemini-cli: setup
	$(BIN)/python -m producer.commands.demo --executor gemini-cli

demo-sweep: setup
	$(BIN)/python -m producer.commands.demo --executor claude-code --executor codex --executor gemini-cli \
	  --executor opencode --executor copilot-cli --executor agent

demo-copilot-cli: setup
	$(BIN)/python -m producer.commands.demo --executor copilot-cli

test: setup
	$(BIN)/pytest -q

test-fast: setup
	$(BIN)/pytest -q -m "not slow"

# The image test: build the image (its Debian base made locally when missing), run a worker
# container against a test Redis, refuse without the sandbox's privileges (tests/deploy/test_image.py).
test-image: setup
	bash deploy/ensure-docker.sh
	SKILL_EVAL_IMAGE_TEST=1 $(BIN)/pytest -q -s tests/deploy/test_image.py

# Every speed benchmark in turn (bench/suite.py), their output written to docs/benchmarks/latest.md
# with the machine, its load and the commit. About 40 minutes; Inspect AI for the peer benchmark
# is installed into bench/.peer on first use.
bench: setup
	$(BIN)/python bench/suite.py

check: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy $(PACKAGES)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(HARNESS_CACHE)
