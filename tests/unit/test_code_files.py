"""The coding tools' file operations on a real folder: bounded answers, exact edits, and no
way out of the workspace or into .git."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from activities.code import files
from activities.tool_errors import ToolError

CALC = """def mean(values):
    return sum(values) / (len(values) + 1)


def total(values):
    return sum(values)
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "repo"
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "calc.py").write_text(CALC)
    (workspace / "README.md").write_text("# Demo\n")
    (workspace / "src" / "pkg" / "util.py").write_text("def helper():\n    return 'mean'\n")
    (workspace / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0binary")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n\tmean = true\n")
    (workspace / "__pycache__").mkdir()
    (workspace / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\0mean")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("mean secret\n")
    return workspace


def refused(kind: str, call: object, *args: object) -> str:
    assert callable(call)
    with pytest.raises(ToolError) as caught:
        call(*args)
    assert caught.value.kind == kind, str(caught.value)
    return str(caught.value)


# Listing ---------------------------------------------------------------------------------


def test_list_files_is_sorted_skips_git_and_caches_and_shows_links(root: Path) -> None:
    (root / "alias.py").symlink_to("calc.py")
    (root / "src" / "out").symlink_to(root.parent / "outside")
    listed = files.list_files(root).splitlines()
    assert listed == [
        "README.md",
        "alias.py -> calc.py",
        "calc.py",
        "logo.png",
        f"src/out -> {root.parent / 'outside'}",  # shown, never walked into
        "src/pkg/util.py",
    ]


def test_list_files_globs_like_a_shell(root: Path) -> None:
    assert files.list_files(root, "**/*.py").splitlines() == ["calc.py", "src/pkg/util.py"]
    assert files.list_files(root, "*.py") == "calc.py"
    assert files.list_files(root, "src/**") == "src/pkg/util.py"
    assert files.list_files(root, "[cR]*") == "README.md\ncalc.py"
    assert files.list_files(root, "*.rs") == "No files match '*.rs'."
    assert files.list_files(root, ".git/*") == "No files match '.git/*'."


def test_list_files_stops_at_500_and_says_how_many_more(root: Path) -> None:
    (root / "many").mkdir()
    for number in range(620):
        (root / "many" / f"f{number:04}.txt").write_text("")
    listed = files.list_files(root, "many/*").splitlines()
    assert len(listed) == 501 and listed[0] == "many/f0000.txt" and listed[499] == "many/f0499.txt"
    assert listed[-1].startswith("[… and 120 more; give a narrower glob")


# Reading ---------------------------------------------------------------------------------


def test_read_file_numbers_lines_and_reads_a_range(root: Path) -> None:
    whole = files.read_file(root, "calc.py")
    assert whole.splitlines()[0] == "calc.py, lines 1-6 of 6:"
    assert "     2      return sum(values) / (len(values) + 1)" in whole
    part = files.read_file(root, "calc.py", 5, 6).splitlines()
    assert part == [
        "calc.py, lines 5-6 of 6:",
        "     5  def total(values):",
        "     6      return sum(values)",
    ]
    assert files.read_file(root, "calc.py", 6, 99).splitlines()[0] == "calc.py, lines 6-6 of 6:"
    assert "has 6 lines; start_line 7 is past its end" in refused(
        "invalid", files.read_file, root, "calc.py", 7
    )
    assert "is before start_line" in refused("invalid", files.read_file, root, "calc.py", 4, 2)


def test_read_file_stops_at_400_lines_and_says_how_to_read_on(root: Path) -> None:
    (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 1001)))
    first = files.read_file(root, "long.txt").splitlines()
    assert first[0] == "long.txt, lines 1-400 of 1000:" and first[-2].endswith("line 400")
    assert first[-1] == "[cut at line 400: read on with start_line=401]"
    last = files.read_file(root, "long.txt", 901).splitlines()
    assert last[0] == "long.txt, lines 901-1000 of 1000:" and not last[-1].startswith("[cut")


def test_read_file_stops_at_its_character_budget(root: Path) -> None:
    (root / "wide.txt").write_text("".join(f"{n}:" + "x" * 1500 + "\n" for n in range(100)))
    answer = files.read_file(root, "wide.txt")
    assert len(answer) < files.MAX_READ_CHARS + 200
    header, *_, footer = answer.splitlines()
    shown = int(header.split("-")[1].split()[0])
    assert 20 < shown < 30 and footer == f"[cut at line {shown}: read on with start_line={shown + 1}]"
    (root / "one-line.min.js").write_text("y" * 100_000)
    assert "[… 98000 more characters]" in files.read_file(root, "one-line.min.js")


def test_read_file_refuses_binary_files_folders_and_what_is_missing(root: Path) -> None:
    assert "binary file" in refused("invalid", files.read_file, root, "logo.png")
    assert "is a folder" in refused("invalid", files.read_file, root, "src")
    assert "no file 'nope.py'" in refused("not_found", files.read_file, root, "nope.py")
    (root / "empty.txt").write_text("")
    assert files.read_file(root, "empty.txt") == "empty.txt is empty."


def test_read_file_never_reads_outside_or_git(root: Path) -> None:
    (root / "leak.txt").symlink_to(root.parent / "outside" / "secret.txt")
    (root / "vendor").symlink_to(root.parent / "outside")
    for given in ("../outside/secret.txt", str(root.parent / "outside" / "secret.txt"), "leak.txt",
                  "vendor/secret.txt", ".git/config"):  # fmt: skip
        assert "secret" not in refused("permission", files.read_file, root, given).replace(given, "")


# Searching -------------------------------------------------------------------------------


def test_search_answers_path_line_text_and_skips_git_caches_and_binaries(root: Path) -> None:
    found = files.search(root, r"mean").splitlines()
    assert found == ["calc.py:1: def mean(values):", "src/pkg/util.py:2: return 'mean'"]
    assert files.search(root, r"def \w+\(", "src/**/*.py") == "src/pkg/util.py:1: def helper():"
    assert files.search(root, "nothing-like-this") == "No line matches 'nothing-like-this' in 3 text files."


def test_search_does_not_follow_links_outside(root: Path) -> None:
    (root / "leak.txt").symlink_to(root.parent / "outside" / "secret.txt")
    (root / "vendor").symlink_to(root.parent / "outside")
    assert files.search(root, "mean secret") == "No line matches 'mean secret' in 3 text files."


def test_search_stops_at_200_matches(root: Path) -> None:
    (root / "big.txt").write_text("match\n" * 500)
    found = files.search(root, "^match$").splitlines()
    assert len(found) == 201 and found[199] == "big.txt:200: match"
    assert found[-1].startswith("[only the first 200 matches are shown")


def test_an_invalid_regex_is_the_model_s_to_fix(root: Path) -> None:
    assert "not a valid (Python) regular expression" in refused("invalid", files.search, root, "mean(")


# Editing ---------------------------------------------------------------------------------


def test_an_edit_replaces_the_one_occurrence_and_shows_the_result(root: Path) -> None:
    said = files.edit_file(root, "calc.py", "/ (len(values) + 1)", "/ len(values)")
    assert (root / "calc.py").read_text() == CALC.replace("/ (len(values) + 1)", "/ len(values)")
    assert said.splitlines() == [
        "Edited calc.py: 1 line(s) from line 2 are now:",
        "     2      return sum(values) / len(values)",
    ]


def test_an_edit_whose_text_is_missing_is_refused_and_suggests_reading(root: Path) -> None:
    message = refused("invalid", files.edit_file, root, "calc.py", "return sum(values) / 2", "x")
    assert "does not occur in 'calc.py'" in message and "code.read_file" in message
    assert (root / "calc.py").read_text() == CALC


def test_an_edit_made_twice_says_the_new_text_is_there(root: Path) -> None:
    files.edit_file(root, "calc.py", "(len(values) + 1)", "len(values)")
    again = refused("invalid", files.edit_file, root, "calc.py", "(len(values) + 1)", "len(values)")
    assert "the new text is there already" in again


def test_an_ambiguous_edit_is_refused_with_the_count(root: Path) -> None:
    message = refused("invalid", files.edit_file, root, "calc.py", "return sum(values)", "return 0")
    assert "occurs 2 times in 'calc.py'" in message and "more of the surrounding lines" in message
    assert (root / "calc.py").read_text() == CALC
    # Overlapping occurrences count too.
    (root / "a.txt").write_text("aaa")
    assert "occurs 2 times" in refused("invalid", files.edit_file, root, "a.txt", "aa", "b")


def test_an_edit_keeps_windows_line_ends(root: Path) -> None:
    (root / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    files.edit_file(root, "win.txt", "one\ntwo\n", "one\n2\n")
    assert (root / "win.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"


def test_edits_stay_inside_the_workspace_and_out_of_git(root: Path) -> None:
    (root / "leak.txt").symlink_to(root.parent / "outside" / "secret.txt")
    (root / "alias.py").symlink_to("calc.py")
    refused("permission", files.edit_file, root, ".git/config", "true", "false")
    refused("permission", files.edit_file, root, "../outside/secret.txt", "mean", "nice")
    refused("permission", files.edit_file, root, "leak.txt", "mean", "nice")
    assert "symbolic link" in refused("permission", files.edit_file, root, "alias.py", "mean", "avg")
    assert (root.parent / "outside" / "secret.txt").read_text() == "mean secret\n"
    assert (root / ".git" / "config").read_text() == "[core]\n\tmean = true\n"
    assert "no file" in refused("not_found", files.edit_file, root, "nope.py", "a", "b")
    assert "binary" in refused("invalid", files.edit_file, root, "logo.png", "PNG", "GIF")


# Writing ---------------------------------------------------------------------------------


def test_write_file_creates_folders_and_replaces_whole_files(root: Path) -> None:
    assert files.write_file(root, "docs/guide/intro.md", "# Intro\nhello\n") == (
        "Created docs/guide/intro.md (2 lines, 14 bytes)."
    )
    assert (root / "docs" / "guide" / "intro.md").read_text() == "# Intro\nhello\n"
    assert files.write_file(root, "README.md", "new") == "Replaced README.md (1 lines, 3 bytes)."
    assert (root / "README.md").read_text() == "new"


def test_write_file_never_writes_through_a_link_outside_or_into_git(root: Path) -> None:
    (root / "alias.py").symlink_to("calc.py")
    (root / "later.txt").symlink_to(root.parent / "outside" / "planted.txt")
    (root / "vendor").symlink_to(root.parent / "outside")
    assert "symbolic link" in refused("permission", files.write_file, root, "alias.py", "x = 2\n")
    refused("permission", files.write_file, root, "later.txt", "planted")
    refused("permission", files.write_file, root, "vendor/planted.txt", "planted")
    refused("permission", files.write_file, root, "../outside/planted.txt", "planted")
    refused("permission", files.write_file, root, ".git/hooks/pre-commit", "#!/bin/sh\nrm -rf /\n")
    refused("permission", files.write_file, root, ".git/config", "[core]\n")
    assert sorted(p.name for p in (root.parent / "outside").iterdir()) == ["secret.txt"]
    assert not (root / ".git" / "hooks").exists()
    assert (root / "calc.py").read_text() == CALC


def test_write_file_refuses_a_folder_or_a_file_in_the_way(root: Path) -> None:
    assert "is a folder" in refused("invalid", files.write_file, root, "src", "x")
    assert "is a file" in refused("invalid", files.write_file, root, "calc.py/inner.txt", "x")


def test_write_file_refuses_what_is_not_a_regular_file(root: Path) -> None:
    os.mkfifo(root / "pipe")
    assert "not a regular file" in refused("invalid", files.write_file, root, "pipe", "x")  # never blocks
    assert files.search(root, "anything") == "No line matches 'anything' in 3 text files."
