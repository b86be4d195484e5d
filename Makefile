# One entry point for the README, .ci/run and developers alike.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup system-deps demo test test-fast check bench clean

# Debian packages the product and its tests run against: a real redis-server, bubblewrap, git,
# and chromium for the HTML report's browser test.
system-deps:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v git >/dev/null || missing="$$missing git"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $$missing; \
	fi

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

setup: system-deps $(STAMP)

# The main job: evaluate the bundled example repo.
demo: setup
	$(BIN)/python -m producer.demo

test: setup
	$(BIN)/pytest -q

test-fast: setup
	$(BIN)/pytest -q -m "not slow"

check: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy schemas engine harnesses reducer producer worker prompts testkit

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
