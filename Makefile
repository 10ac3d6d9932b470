# Two commands do all the set-up (see README.md):
#   make app   - install into .venv and open the workbench on the shipped demo data
#   make test  - install into .venv and run the whole test suite (what .ci/run calls)
# Both are idempotent: the install is skipped while pyproject.toml is unchanged.

PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP    = $(VENV)/.installed-$(1)-$(shell sha256sum pyproject.toml | cut -c1-12)
PORT    ?= 8501
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: app test gate install-app install-test chromium demo bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install-app: $(BIN)/python
	@if [ ! -f "$(call STAMP,app)" ]; then \
	  $(BIN)/pip install -q torch==2.13.0 && \
	  $(BIN)/pip install -q -e '.[app]' && rm -f $(VENV)/.installed-app-* && touch "$(call STAMP,app)"; \
	fi

install-test: $(BIN)/python
	@if [ ! -f "$(call STAMP,test)" ]; then \
	  $(BIN)/pip install -q torch==2.13.0 && \
	  $(BIN)/pip install -q -e '.[test]' && rm -f $(VENV)/.installed-test-* && touch "$(call STAMP,test)" && \
	  touch "$(call STAMP,app)"; \
	fi

# Debian's Chromium drives the app's end-to-end test (playwright never downloads a browser here).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

app: install-app
	$(BIN)/hybridmem index datasets/demo-memory/workspace
	$(BIN)/streamlit run app.py --server.headless true --server.port $(PORT) --browser.gatherUsageStats false

test: install-test chromium
	$(BIN)/python -m pytest -q

# The retrieval-quality regression gate (also run inside the test suite): exits non-zero naming each metric that dropped.
gate: install-test
	$(BIN)/hybridmem eval gate --suite eval/suites/ci.toml --baseline eval/baselines/ci.json

demo: install-app
	$(BIN)/hybridmem index datasets/demo-memory/workspace
	$(BIN)/hybridmem search "retry backoff for the payment processor" datasets/demo-memory/workspace --explain

bench: install-test
	$(BIN)/hybridmem bench --out eval/bench

clean:
	rm -rf $(VENV) .pytest_cache datasets/demo-memory/workspace/.hybridmem
