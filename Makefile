# tpututor: every target bootstraps .venv from nothing (Python 3.11 + constraints.txt).
#   make run        execute every lesson headless into build/ and print a summary (PROFILE=full|ci)
#   make test       ruff (lint, format), unit tests and every lesson executed once (ci profile)
#   make test-fast  everything except executing the lessons and the slow framework tests (a few minutes)
#   make lab        JupyterLab on notebooks/ (a .md opens as a notebook)
#   make sync       pair notebooks/*.md and *.ipynb with Jupytext, outputs stripped
#   make site       the course as a website in build/site/ (after make run), English and Korean
#   make translations  the Korean edition (lessons, instructor guide, error atlas) regenerated (docs/translating.md)
#   make pins       binder's requirement files regenerated from tpututor/data/pins.toml, the one pins file,
#                   and its pins checked against constraints.txt and pyproject.toml
#   make badges     stamp headings, badges, lesson cards, setup cells and the README table from the lessons' front matter
#   make release    tag v<version> once the setup cells, badges and version agree
#   make clean      remove build outputs; make distclean also removes .venv
#   make colab      run the lessons under the stack Colab's TPU runtime ships (Python 3.13, JAX 0.7.2,
#                   PyTorch/XLA 2.9; ci profile); make colab-jax is the same
#   make system     Debian packages the browser test needs (Chromium, a Korean font), when run as root
#   make device-bundle / device-rehearsal   prepare the GPU machine's run, and rehearse it here
#   make maxtext-run  the lesson's tiny Llama through MaxText on the CPU (own Python 3.12 venv), recorded in
#                   docs/artifacts/maxtext-cpu-run.json and .log for lesson 13b; not part of make test

# constraints.txt was locked for this Python; another one resolves other wheels, or none.
LOCK_PYTHON := 3.11
PYTHON  ?= $(shell command -v python$(LOCK_PYTHON) || command -v python3)
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.tpututor-installed
# The second environment, Colab's TPU stack (see make colab below); defined here, before any rule
# names it as a prerequisite, since make expands prerequisites as it reads them.
COLAB_VENV   := .venv-colab
COLAB_STAMP  := $(COLAB_VENV)/.tpututor-installed
PROFILE ?= full
LAB_PORT ?= 8888
LAB_ARGS ?=
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
TEST_RUN := build/test-run

.PHONY: run test test-fast lab sync badges student workshop clean distclean lock reference colab colab-jax system release python-check \
        device-bundle device-rehearsal site translations pins maxtext-run

python-check:
	@v=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
	if [ "$$v" != "$(LOCK_PYTHON)" ]; then \
	  echo "tpututor: constraints.txt is locked for Python $(LOCK_PYTHON), but $(PYTHON) is Python $${v:-missing}: install python$(LOCK_PYTHON) (or run make PYTHON=/path/to/python$(LOCK_PYTHON))" >&2; exit 1; fi

$(STAMP): pyproject.toml constraints.txt | python-check
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-cache-dir -c constraints.txt -e '.[all]'
	@mkdir -p $(VENV)/share/jupyter/lab/settings
	@cp binder/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

# The site's browser test drives Debian's Chromium (Playwright downloads no browser) and reads Korean
# pages, so the machine needs Chromium and a CJK font. Installed here, as root, when missing; a
# machine where this cannot run says what to install. CI runs as root on Debian.
SYSTEM_PACKAGES := chromium fonts-noto-cjk
system:
	@if command -v chromium >/dev/null 2>&1 && fc-list 2>/dev/null | grep -qi "noto sans cjk"; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing $(SYSTEM_PACKAGES) (Debian packages, for the site's browser test)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(SYSTEM_PACKAGES) >/dev/null; \
	else echo "tpututor: the site test needs $(SYSTEM_PACKAGES): sudo apt-get install $(SYSTEM_PACKAGES)" >&2; fi

run: $(STAMP)
	$(PY) -m tpututor_course run --profile $(PROFILE) --out build

# Each lesson is executed once, into $(TEST_RUN); the stable-output and student checks read those.
# JOBS lessons run at a time, beside the unit tests (tests/conftest.py): on 2 cores every lesson's
# timing asserts then hold with the other core busy, and the lessons overlap the unit tests.
JOBS ?= 2
# The two environments and the Debian packages are installed side by side first (downloads overlap).
test:
	@$(MAKE) --no-print-directory -j3 $(STAMP) $(COLAB_STAMP) system
	$(PY) -m ruff check && $(PY) -m ruff format --check
	TPUTUTOR_PROFILE=ci TPUTUTOR_TEST_RUN=$(TEST_RUN) TPUTUTOR_STRICT_SKIPS=1 TPUTUTOR_TEST_JOBS=$(JOBS) $(PY) -m pytest

test-fast: $(STAMP)
	$(PY) -m ruff check && $(PY) -m ruff format --check
	TPUTUTOR_PROFILE=ci $(PY) -m pytest -m "not lessons and not slow"

# Colab's TPU runtime keeps its own JAX (the setup cell does not replace it: libtpu must match), its
# PyTorch/XLA, Flax, Optax, Orbax and Grain, on Python 3.13: the lessons must run on those versions too.
# A second venv holds that stack ([colab] in tpututor/data/pins.toml, read by tpututor/fakes.py) and
# the add-ons a setup cell installs there; `make colab` runs every lesson in it. Only 05 may skip (that runtime has no
# TensorFlow); any other skip fails the run. `make test` builds the venv first: the error atlas's
# tests also run each JAX example under Colab's JAX.
COLAB_PY_BIN ?= $(shell for p in $$(command -v python3.13) $(HOME)/.pyenv/versions/3.13*/bin/python3.13; do \
                   "$$p" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null && { echo "$$p"; break; }; done)
COLAB_SKIPS  := 05_tf_tpustrategy
$(COLAB_STAMP): tpututor/fakes.py tpututor/launch.py tpututor/data/pins.toml
	@test -n "$(COLAB_PY_BIN)" || { echo "tpututor: Colab's TPU runtime is Python 3.13: install python3.13 (or run make COLAB_PY_BIN=/path/to/python3.13)" >&2; exit 1; }
	@test -x $(COLAB_VENV)/bin/python || $(COLAB_PY_BIN) -m venv $(COLAB_VENV)
	$(COLAB_VENV)/bin/python -c "import sys; sys.path.insert(0, '.'); from tpututor.fakes import colab_requirements as r; print('\n'.join(r()))" > $(COLAB_VENV)/colab.txt
	$(COLAB_VENV)/bin/pip install --quiet --no-cache-dir -r $(COLAB_VENV)/colab.txt papermill ipykernel matplotlib tqdm pyyaml
	$(COLAB_VENV)/bin/pip install --quiet --no-deps -e .
	@touch $@

colab: $(COLAB_STAMP)
	$(COLAB_VENV)/bin/python -m tpututor_course run --profile ci --out build/colab --no-html --jobs $(JOBS) --allow-skip $(COLAB_SKIPS)

colab-jax: colab  # the name it had when only the JAX lessons ran there

# The accelerator day (tpututor_course/device.py): the wheels a GPU machine's image lacks, for its
# Python 3.12, downloaded here; and the same check rehearsed here on the CPU, in a fresh Python 3.12
# venv holding the image's JAX 0.11 stack and the carried wheels only (ci profile).
DEVICE_VENV := .venv-device
DEVICE_BUNDLE := build/device-bundle/carried.txt
device-bundle: $(DEVICE_BUNDLE)
$(DEVICE_BUNDLE): tpututor_course/device.py tpututor/data/pins.toml | $(STAMP)
	$(PY) -m tpututor_course device bundle --out build/device-bundle

device-rehearsal: $(DEVICE_BUNDLE)
	@test -x $(DEVICE_VENV)/bin/python || $$($(PY) -c "from tpututor_course.device import python312; print(python312())") -m venv $(DEVICE_VENV)
	$(DEVICE_VENV)/bin/pip install --quiet --no-cache-dir $$($(PY) -c "from tpututor_course.device import IMAGE; print(' '.join(IMAGE))")
	$(DEVICE_VENV)/bin/python -m tpututor_course device check --bundle build/device-bundle --out build/device-rehearsal --profile ci

# MaxText, for lesson 13b's stack table (not part of make test): maxtext 0.2.5 needs Python 3.12 and a
# newer JAX than constraints.txt, so it gets its own venv, pinned by binder/maxtext-requirements.txt
# (about 1.3 GiB; make pins writes it from [maxtext] in tpututor/data/pins.toml). The run converts the
# lesson's tiny Llama to a MaxText checkpoint and trains it a few steps on the CPU, offline, and writes
# docs/artifacts/maxtext-cpu-run.json and .log: commit both.
MAXTEXT_PY_BIN ?= $(shell for p in $$(command -v python3.12) $(HOME)/.pyenv/versions/3.12*/bin/python3.12; do \
                     "$$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { echo "$$p"; break; }; done)
MAXTEXT_VENV  := .venv-maxtext
MAXTEXT_STAMP := $(MAXTEXT_VENV)/.tpututor-installed
$(MAXTEXT_STAMP): binder/maxtext-requirements.txt
	@test -n "$(MAXTEXT_PY_BIN)" || { echo "tpututor: MaxText 0.2.5 needs Python 3.12: install python3.12 (or run make MAXTEXT_PY_BIN=/path/to/python3.12)" >&2; exit 1; }
	@test -x $(MAXTEXT_VENV)/bin/python || $(MAXTEXT_PY_BIN) -m venv $(MAXTEXT_VENV)
	$(MAXTEXT_VENV)/bin/pip install --quiet --no-cache-dir -r binder/maxtext-requirements.txt
	@touch $@

maxtext-run: $(STAMP) $(MAXTEXT_STAMP)
	$(PY) -m tpututor_course.maxtext_run --out docs/artifacts --maxtext-python $(MAXTEXT_VENV)/bin/python

# The course as a website, from the notebooks make run executed (same profile): build/site/en/.
site: $(STAMP)
	@test -f build/timings.json || { echo "tpututor: no executed lessons in build/: run make run (or make run PROFILE=ci) first" >&2; exit 1; }
	$(PY) -m tpututor_course site --executed build --out build/site --lang en --languages en,ko
	$(PY) -m tpututor_course site --executed build --out build/site --lang ko --languages en,ko

# The Korean edition: catalogues brought in step with the English (changed cells marked fuzzy), then
# notebooks/ko/ and README.ko.md's lesson table generated from them. See docs/translating.md.
translations: $(STAMP)
	$(PY) -m tpututor_course translate update
	$(PY) -m tpututor_course translate build
	$(PY) -m tpututor_course workshop
	$(PY) -m tpututor_course errors_page

# The one pins file, tpututor/data/pins.toml: binder/requirements.txt and binder/maxtext-requirements.txt
# written from it, then its [lock] checked against constraints.txt (after make lock, bring it in step).
pins: $(STAMP)
	$(PY) -m tpututor_course pins

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 --port=$(LAB_PORT) $(ROOT_FLAG) $(LAB_ARGS)

sync: $(STAMP)
	$(VENV)/bin/jupytext --sync notebooks/[0-9]*.md
	$(VENV)/bin/jupyter nbconvert --clear-output --inplace --log-level=WARN notebooks/[0-9]*.ipynb

badges: $(STAMP)
	$(PY) -m tpututor_course stamp
	$(MAKE) --no-print-directory sync

# The student build: every lesson with its worked answers replaced by stubs, in build/student.
student: $(STAMP)
	$(PY) -m tpututor_course student build/student

# The instructor guide, docs/workshop.md, with execution times measured here in both profiles.
workshop: $(STAMP)
	$(PY) -m tpututor_course run --profile ci --out build/workshop-ci --no-html
	$(PY) -m tpututor_course run --profile full --out build/workshop-full --no-html
	$(PY) -m tpututor_course workshop build/workshop-ci/timings.json build/workshop-full/timings.json

# Expected outputs of the cells tagged nbval-check-output (tests/reference/), from the last make test
# run when there is one, else from a fresh ci run.
reference: $(STAMP)
	TPUTUTOR_PROFILE=ci $(PY) -m tpututor_course reference $(wildcard $(TEST_RUN))

release: $(STAMP)
	$(PY) -m tpututor_course release

# Re-resolve the newest versions that install together and pin them (review the diff).
lock: python-check
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install --quiet --no-cache-dir -e '.[all]'
	{ sed -n '1,3p' constraints.txt; .venv-lock/bin/pip freeze --exclude-editable; } > constraints.new
	mv constraints.new constraints.txt && rm -rf .venv-lock

clean:
	rm -rf build .pytest_cache notebooks/.ipynb_checkpoints
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(COLAB_VENV) .venv-colab-jax $(DEVICE_VENV) $(MAXTEXT_VENV) *.egg-info
