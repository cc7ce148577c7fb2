# tpututor: every target bootstraps .venv from nothing (Python 3.11 + constraints.txt).
#   make run     execute every lesson headless into build/ and print a summary (PROFILE=full|ci)
#   make test    unit tests and every notebook executed (ci profile)
#   make lab     JupyterLab on notebooks/ (a .md opens as a notebook)
#   make sync    pair notebooks/*.md and *.ipynb with Jupytext, outputs stripped
#   make clean   remove build outputs; make distclean also removes .venv
#   make colab-jax  run the JAX lessons under the JAX that Colab's TPU runtime ships (ci profile)

PYTHON  ?= $(shell command -v python3.11 || command -v python3)
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.tpututor-installed
PROFILE ?= full
LAB_PORT ?= 8888
LAB_ARGS ?=
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: run test lab sync badges student workshop clean distclean lock reference colab-jax

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

# Colab's TPU runtime keeps its own JAX (the setup cell does not replace it, libtpu must match), so
# the JAX lessons must also run on that version: a second venv with it, everything else as locked.
COLAB_VENV  := .venv-colab-jax
JAX_LESSONS := $(filter-out notebooks/03_% notebooks/04_%,$(wildcard notebooks/[0-9]*.ipynb))
colab-jax: $(STAMP)
	@test -x $(COLAB_VENV)/bin/python || $(PYTHON) -m venv $(COLAB_VENV)
	grep -v -E '^(jax|jaxlib)==' constraints.txt > $(COLAB_VENV)/constraints.txt
	$(COLAB_VENV)/bin/pip install --quiet --no-cache-dir -c $(COLAB_VENV)/constraints.txt \
	  $$($(PY) -c "from tpututor.fakes import COLAB_TPU_PACKAGES as p; print(f'jax[cpu]=={p[\"jax\"]} jaxlib=={p[\"jaxlib\"]}')") \
	  papermill ipykernel matplotlib tqdm
	$(COLAB_VENV)/bin/pip install --quiet --no-deps -e .
	$(COLAB_VENV)/bin/python -m tpututor run --profile ci --out build/colab-jax --no-html $(JAX_LESSONS)

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
	rm -rf $(VENV) $(COLAB_VENV) *.egg-info
