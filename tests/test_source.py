"""tpututor.source: the package code a lesson shows, read from the files the lesson runs."""

from __future__ import annotations

import pytest

from tpututor import bench, source


class Sample:
    def method(self):
        return 1


def test_source_of_a_function_is_its_file_text_dedented_and_several_are_blank_line_separated():
    text = source.source_of(bench.time_alternating, Sample.method)
    assert text.startswith("def time_alternating(") and "\n\ndef method(self):\n    return 1" in text


def test_a_code_string_is_shown_as_it_is_without_its_common_indent():
    assert source.source_of("    if x:\n        y()\n") == "if x:\n    y()"


@pytest.mark.parametrize("bad", [len, 3])
def test_something_without_source_is_a_clear_error_naming_what_to_pass(bad):
    with pytest.raises(TypeError, match="pass a function, class or module"):
        source.source_of(bad)


def test_show_with_nothing_to_show_says_what_to_pass():
    with pytest.raises(ValueError, match="show what"):
        source.show()


def test_outside_a_notebook_show_prints_the_code(capsys):
    source.show(Sample.method)
    assert capsys.readouterr().out == "def method(self):\n    return 1\n"
