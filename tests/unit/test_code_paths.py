"""Where a model's path may lead: inside the workspace only, never into .git, and never out
through a symbolic link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from activities.code.paths import resolve_path
from activities.tool_errors import ToolError


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace with a file, a folder, git's folder and a secret next to (not in) it."""
    workspace = tmp_path / "repo"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("print('hi')\n")
    (workspace / "calc.py").write_text("x = 1\n")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("token\n")
    return workspace


def refused(root: Path, given: str, kind: str = "permission") -> str:
    with pytest.raises(ToolError) as caught:
        resolve_path(root, given)
    assert caught.value.kind == kind, str(caught.value)
    return str(caught.value)


def test_a_relative_path_names_a_path_under_the_root(root: Path) -> None:
    assert resolve_path(root, "calc.py") == root / "calc.py"
    assert resolve_path(root, "./src/app.py") == root / "src" / "app.py"
    assert resolve_path(root, "src/../calc.py") == root / "calc.py"
    assert resolve_path(root, "new/folder/file.txt") == root / "new" / "folder" / "file.txt"  # may not exist
    assert resolve_path(root, "") == root and resolve_path(root, ".") == root


@pytest.mark.parametrize("given", ["../outside/secret.txt", "..", "src/../../outside", "a/b/../../../x"])
def test_climbing_out_is_refused_with_the_path_and_what_to_do(root: Path, given: str) -> None:
    message = refused(root, given)
    assert f"{given!r} leads outside the workspace" in message
    assert "relative to the repository root" in message


@pytest.mark.parametrize("given", ["/etc/passwd", str(Path("/tmp").resolve()), "//server/share"])
def test_an_absolute_path_is_refused(root: Path, given: str) -> None:
    assert "is an absolute path; give a path relative to the repository root" in refused(root, given)


def test_even_the_workspace_s_own_absolute_path_is_refused(root: Path) -> None:
    refused(root, str(root / "calc.py"))


@pytest.mark.parametrize(
    "given", [".git", ".git/config", "src/../.git/config", ".GIT/config", "sub/.git/HEAD"]
)
def test_git_s_own_folder_is_refused(root: Path, given: str) -> None:
    assert "inside .git" in refused(root, given)


def test_a_symbolic_link_to_a_file_outside_is_refused(root: Path) -> None:
    (root / "leak.txt").symlink_to(root.parent / "outside" / "secret.txt")
    message = refused(root, "leak.txt")
    assert "'leak.txt', a symbolic link to a place outside the workspace" in message


def test_a_symbolic_link_to_a_folder_outside_is_refused_anywhere_along_the_path(root: Path) -> None:
    (root / "src" / "vendor").symlink_to(root.parent / "outside")
    assert "'src/vendor'" in refused(root, "src/vendor/secret.txt")
    assert "'src/vendor'" in refused(root, "src/vendor/not-there-yet.txt")  # a write would land outside


def test_a_dangling_link_that_would_write_outside_is_refused(root: Path) -> None:
    (root / "later.txt").symlink_to(root.parent / "outside" / "created-by-a-write.txt")
    refused(root, "later.txt")


def test_relative_link_targets_that_climb_out_are_refused(root: Path) -> None:
    (root / "src" / "up").symlink_to(Path("..") / ".." / "outside")
    refused(root, "src/up/secret.txt")


def test_a_link_into_git_s_folder_is_refused(root: Path) -> None:
    (root / "gitdir").symlink_to(root / ".git")
    (root / "cfg").symlink_to(Path(".git") / "config")
    assert "into .git" in refused(root, "gitdir/config")
    assert "into .git" in refused(root, "cfg")


def test_links_inside_the_workspace_are_allowed(root: Path) -> None:
    (root / "alias.py").symlink_to("calc.py")
    (root / "lib").symlink_to(root / "src")
    assert resolve_path(root, "alias.py") == root / "alias.py"  # unresolved: a writer can see the link
    assert resolve_path(root, "lib/app.py").read_text() == "print('hi')\n"


def test_dot_dot_after_a_link_is_read_on_the_words_not_through_the_link(root: Path) -> None:
    (root / "out").symlink_to(root.parent / "outside")
    # The OS would take out/.. to the outside folder's parent; the path's words say the root.
    assert resolve_path(root, "out/../calc.py") == root / "calc.py"


def test_a_workspace_reached_through_a_link_still_holds_its_own_links(root: Path, tmp_path: Path) -> None:
    via = tmp_path / "via"
    via.symlink_to(root)
    (root / "alias.py").symlink_to("calc.py")
    assert resolve_path(via, "alias.py") == via / "alias.py"
    os.symlink(tmp_path / "outside", root / "out")
    refused(via, "out/secret.txt")


def test_a_nul_character_is_invalid(root: Path) -> None:
    refused(root, "calc.py\0.txt", kind="invalid")
