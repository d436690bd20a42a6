# The two commands of the README: `make run` and `make test` (each creates .venv on first use).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-slow install clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	# PyPI's torch + torchvision together (a local +cpu torch wheel breaks torchvision).
	PIP_FIND_LINKS= $(VENV)/bin/pip install --quiet --upgrade pip
	PIP_FIND_LINKS= $(VENV)/bin/pip install --quiet -e ".[dev]"
	$(PY) -c "import torch, torchvision, hydra, wandb"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) run.py $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -n auto --dist worksteal $(ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest -n auto --dist worksteal -m slow $(ARGS)

clean:
	rm -rf outputs multirun wandb .pytest_cache
