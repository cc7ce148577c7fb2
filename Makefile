# tpututor: every target bootstraps .venv from nothing (Python 3.11 + constraints.txt).
#   make run        execute every lesson headless into build/ and print a summary (PROFILE=full|ci)
#   make test       unit tests and every lesson executed once (ci profile)
#   make test-fast  everything except executing the lessons and the slow framework tests (a few minutes)
#   make lab        JupyterLab on notebooks/ (a .md opens as a notebook)
#   make sync       pair notebooks/*.md and *.ipynb with Jupytext, outputs stripped
#   make site       the course as a website in build/site/ (after make run), English and Korean
#   make translations  the Korean edition regenerated from the English and i18n/ko (docs/translating.md)
#   make badges     stamp headings, badges, lesson cards, setup cells and the README table from the lessons' front matter
#   make release    tag v<version> once the setup cells, badges and version agree
#   make clean      remove build outputs; make distclean also removes .venv
#   make colab-jax  run the lessons under the JAX stack that Colab's TPU runtime ships (ci profile)
#   make device-bundle / device-rehearsal   prepare the GPU machine's run, and rehearse it here

# constraints.txt was locked for this Python; another one resolves other wheels, or none.
LOCK_PYTHON := 3.11
PYTHON  ?= $(shell command -v python$(LOCK_PYTHON) || command -v python3)
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.tpututor-installed
PROFILE ?= full
LAB_PORT ?= 8888
LAB_ARGS ?=
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
TEST_RUN := build/test-run

.PHONY: run test test-fast lab sync badges student workshop clean distclean lock reference colab-jax release python-check \
        device-bundle device-rehearsal site translations

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

run: $(STAMP)
	$(PY) -m tpututor run --profile $(PROFILE) --out build

# Each lesson is executed once, into $(TEST_RUN); the stable-output and student checks read those.
test: $(STAMP)
	TPUTUTOR_PROFILE=ci TPUTUTOR_TEST_RUN=$(TEST_RUN) $(PY) -m pytest

test-fast: $(STAMP)
	TPUTUTOR_PROFILE=ci $(PY) -m pytest -m "not lessons and not slow"

# Colab's TPU runtime keeps its own JAX (the setup cell does not replace it: libtpu must match), and
# the Flax, Optax, Orbax and Grain built for it, so the lessons must also run on those versions: a
# second venv with them, everything else as locked. Lessons that import TensorFlow or PyTorch are
# skipped there by the runner, saying so (their front matter names what they import).
COLAB_VENV  := .venv-colab-jax
colab-jax: $(STAMP)
	@test -x $(COLAB_VENV)/bin/python || $(PYTHON) -m venv $(COLAB_VENV)
	$(PY) -c "from tpututor.course.fakes import COLAB_TPU_PACKAGES as p, COLAB_JAX_STACK as s; \
	  print('\n'.join(f'{n}=={p[n]}' for n in s))" > $(COLAB_VENV)/colab.txt
	grep -v -i -E "^($$(cut -d= -f1 $(COLAB_VENV)/colab.txt | paste -sd'|'))==" constraints.txt > $(COLAB_VENV)/constraints.txt
	$(COLAB_VENV)/bin/pip install --quiet --no-cache-dir -c $(COLAB_VENV)/constraints.txt \
	  -r $(COLAB_VENV)/colab.txt papermill ipykernel matplotlib tqdm pyyaml
	$(COLAB_VENV)/bin/pip install --quiet --no-deps -e .
	$(COLAB_VENV)/bin/python -m tpututor run --profile ci --out build/colab-jax --no-html

# The accelerator day (tpututor/course/device.py): the wheels a GPU machine's image lacks, for its
# Python 3.12, downloaded here; and the same check rehearsed here on the CPU, in a fresh Python 3.12
# venv holding the image's JAX 0.11 stack and the carried wheels only (ci profile).
DEVICE_VENV := .venv-device
DEVICE_BUNDLE := build/device-bundle/carried.txt
device-bundle: $(DEVICE_BUNDLE)
$(DEVICE_BUNDLE): tpututor/course/device.py | $(STAMP)
	$(PY) -m tpututor.course device bundle --out build/device-bundle

device-rehearsal: $(DEVICE_BUNDLE)
	@test -x $(DEVICE_VENV)/bin/python || $$($(PY) -c "from tpututor.course.device import python312; print(python312())") -m venv $(DEVICE_VENV)
	$(DEVICE_VENV)/bin/pip install --quiet --no-cache-dir $$($(PY) -c "from tpututor.course.device import IMAGE; print(' '.join(IMAGE))")
	$(DEVICE_VENV)/bin/python -m tpututor.course device check --bundle build/device-bundle --out build/device-rehearsal --profile ci

# The course as a website, from the notebooks make run executed (same profile): build/site/en/.
site: $(STAMP)
	@test -f build/timings.json || { echo "tpututor: no executed lessons in build/: run make run (or make run PROFILE=ci) first" >&2; exit 1; }
	$(PY) -m tpututor.course site --executed build --out build/site --lang en --languages en,ko
	$(PY) -m tpututor.course site --executed build --out build/site --lang ko --languages en,ko

# The Korean edition: catalogues brought in step with the English (changed cells marked fuzzy), then
# notebooks/ko/ and README.ko.md's lesson table generated from them. See docs/translating.md.
translations: $(STAMP)
	$(PY) -m tpututor.course translate update
	$(PY) -m tpututor.course translate build

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 --port=$(LAB_PORT) $(ROOT_FLAG) $(LAB_ARGS)

sync: $(STAMP)
	$(VENV)/bin/jupytext --sync notebooks/[0-9]*.md
	$(VENV)/bin/jupyter nbconvert --clear-output --inplace --log-level=WARN notebooks/[0-9]*.ipynb

badges: $(STAMP)
	$(PY) -m tpututor.course stamp
	$(MAKE) --no-print-directory sync

# The student build: every lesson with its worked answers replaced by stubs, in build/student.
student: $(STAMP)
	$(PY) -m tpututor.course student build/student

# The instructor guide, docs/workshop.md, with execution times measured here in both profiles.
workshop: $(STAMP)
	$(PY) -m tpututor run --profile ci --out build/workshop-ci --no-html
	$(PY) -m tpututor run --profile full --out build/workshop-full --no-html
	$(PY) -m tpututor.course workshop build/workshop-ci/timings.json build/workshop-full/timings.json

# Expected outputs of the cells tagged nbval-check-output (tests/reference/), from the last make test
# run when there is one, else from a fresh ci run.
reference: $(STAMP)
	TPUTUTOR_PROFILE=ci $(PY) -m tpututor.course reference $(wildcard $(TEST_RUN))

release: $(STAMP)
	$(PY) -m tpututor.course release

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
	rm -rf $(VENV) $(COLAB_VENV) $(DEVICE_VENV) *.egg-info
