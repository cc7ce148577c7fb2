"""Course tooling: what builds, runs and checks the course in a clone. Lessons do not import it, and
``pip install tpututor`` does not install it (a learner's Colab or Kaggle runtime gets ``tpututor`` only).

Modules: ``catalog`` (the lessons' front matter, the one reader of lesson metadata),
``stamp`` (headings, badges, lesson cards, setup cells, the README table, ``data/lessons.json``),
``runner`` and ``run`` (execute lessons headless: ``make run``, ``python -m tpututor_course run``), ``student`` (the student build and its
rehearsal), ``reference`` (the stable outputs CI compares), ``workshop`` (the instructor guide),
``release`` (tag a release once setup cell, badges and version agree), ``site`` (the website),
``translate`` (the Korean edition), ``errors_page`` (the error atlas pages), ``device`` (the GPU
machine's run), ``pins`` (binder's requirement files from the one pins file, ``tpututor/data/pins.toml``,
and its check), ``maxtext_run`` (the
MaxText run ``make maxtext-run`` records for lesson 13b (LoRA and export), in its own venv).

Every tool finds the lessons in the repository it runs in (or a folder you name), never next to
the installed package: ``python -m tpututor_course COMMAND`` (``__main__`` lists the commands).
"""
