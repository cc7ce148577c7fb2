# tpututor: every target bootstraps .venv from nothing (Python 3.11 + constraints.txt).
#   make run     execute every lesson headless into build/ and print a summary (PROFILE=full|ci)
#   make test    unit tests and every notebook executed (ci profile)
#   make lab     JupyterLab on notebooks/ (a .md opens as a notebook)
#   make sync    pair notebooks/*.md and *.ipynb with Jupytext, outputs stripped
#   make clean   remove build outputs; make distclean also removes .venv

PYTHON  ?= $(shell command -v python3.11 || command -v python3)
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.tpututor-installed
PROFILE ?= full
LAB_PORT ?= 8888
LAB_ARGS ?=
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: run test lab sync badges student workshop clean distclean lock reference

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-cache-dir -c constraints.txt -e '.[all]'
	@mkdir -p $(VENV)/share/jupyter/lab/settings
	@cp binder/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

run: $(STAMP)
	$(PY) -m tpututor run --profile $(PROFILE) --out build

test: $(STAMP)
	TPUTUTOR_PROFILE=ci $(PY) -m pytest

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 --port=$(LAB_PORT) $(ROOT_FLAG) $(LAB_ARGS)

sync: $(STAMP)
	$(VENV)/bin/jupytext --sync notebooks/[0-9]*.md
	$(VENV)/bin/jupyter nbconvert --clear-output --inplace --log-level=WARN notebooks/[0-9]*.ipynb

# Badges, setup cells, Colab metadata and the README's lesson table, from [tool.tpututor] in pyproject.toml.
badges: $(STAMP)
	$(PY) -m tpututor.launch
	$(MAKE) --no-print-directory sync

# The student build: every lesson with its worked answers replaced by stubs, in build/student/.
student: $(STAMP)
	$(PY) -m tpututor.student build/student

# The instructor guide, docs/workshop.md, with execution times measured here in both profiles.
workshop: $(STAMP)
	$(PY) -m tpututor run --profile ci --out build/workshop-ci --no-html
	$(PY) -m tpututor run --profile full --out build/workshop-full --no-html
	$(PY) -m tpututor.workshop build/workshop-ci/timings.json build/workshop-full/timings.json

# Expected outputs of the cells tagged nbval-check-output (tests/reference/), from a ci run.
reference: $(STAMP)
	TPUTUTOR_PROFILE=ci $(PY) tests/make_reference.py

# Re-resolve the newest versions that install together and pin them (review the diff).
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install --quiet --no-cache-dir -e '.[all]'
	{ sed -n '1,3p' constraints.txt; .venv-lock/bin/pip freeze --exclude-editable; } > constraints.new
	mv constraints.new constraints.txt && rm -rf .venv-lock

clean:
	rm -rf build .pytest_cache notebooks/.ipynb_checkpoints
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) *.egg-info
