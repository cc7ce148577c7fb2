"""Course tooling: what builds, runs and checks the course in a clone. Lessons do not import it.

Modules: ``catalog`` (the lessons' front matter, the one reader of lesson metadata),
``stamp`` (headings, badges, lesson cards, setup cells, the README table, ``data/lessons.json``),
``runner`` (execute lessons headless: ``make run``), ``student`` (the student build and its
rehearsal), ``reference`` (the stable outputs CI compares), ``workshop`` (the instructor guide),
``release`` (tag a release once setup cell, badges and version agree), ``fakes`` (fake machines
for the tests and for lesson 00's tour of runtimes you may not have), ``maxtext_run`` (the
MaxText run ``make maxtext-run`` records for lesson 13 (bring your own model), in its own venv).

Every tool finds the lessons in the repository it runs in (or a folder you name), never next to
the installed package: ``python -m tpututor.course {stamp,student,workshop,reference,release}``.
"""
