"""A loop's patch named from the top of the repository its project is a folder of: it applies
with `git -C FOLDER apply` and with `git apply` at the top, whatever the names hold (spaces,
non-ASCII, a rename, a binary file, a removed line that looks like a header)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from surfaces.cli.patch_paths import prefix_paths, repository_prefix


def git(cwd: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)


def changed_project(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """The project before (a plain folder), after, and the patch between, as a loop stores it."""
    work = tmp_path / "work"
    work.mkdir()
    files = {
        "calc.py": b"a\n",
        "sp ace.txt": b"keep\n",
        "\u00e9.txt": b"x\n",
        "old.txt": b"r\n",
        "b.bin": b"\0\1bin",
    }
    for name, data in files.items():
        (work / name).write_bytes(data)
    assert git(work, "init", "-q").returncode == 0
    git(work, "add", "-A")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    before = tmp_path / "before"
    shutil.copytree(work, before, ignore=shutil.ignore_patterns(".git"))
    (work / "calc.py").write_bytes(b"b\n-- a/calc.py\n")  # removed and added lines, header-like
    (work / "sp ace.txt").write_bytes(b"kept\n")
    (work / "\u00e9.txt").write_bytes(b"y\n")
    (work / "b.bin").write_bytes(b"\0\2bin")
    (work / "added.py").write_bytes(b"new\n")
    git(work, "mv", "old.txt", "new name.txt")
    git(work, "add", "-A")
    return before, work, git(work, "diff", "--cached", "--binary").stdout


def same(left: Path, right: Path) -> bool:
    return (
        subprocess.run(["diff", "-r", "--exclude=.git", str(left), str(right)], check=False).returncode == 0
    )


@pytest.mark.parametrize("folder", ["demo-project", "my dir/sub \u00e9"])
def test_the_patch_applies_in_the_folder_and_at_the_top(tmp_path: Path, folder: str) -> None:
    before, after, patch = changed_project(tmp_path)
    top = tmp_path / "clone"
    assert git(tmp_path, "init", "-q", str(top)).returncode == 0
    shutil.copytree(before, top / folder)
    prefix = repository_prefix(str(top / folder))
    assert prefix == folder + "/"
    named = prefix_paths(patch, prefix)

    applied = git(top / folder, "apply", stdin=named)  # `git -C FOLDER apply`
    assert applied.returncode == 0, applied.stderr
    assert same(after, top / folder)
    assert git(top, "apply", "-R", stdin=named).returncode == 0  # and at the top
    assert same(before, top / folder)
    # Unchanged names: git skips every file outside the folder it runs in, and says nothing.
    assert git(top / folder, "apply", stdin=patch).returncode == 0
    assert same(before, top / folder)


def test_a_project_that_is_a_repository_or_in_none_keeps_its_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # whatever holds tmp_path
    alone = tmp_path / "alone"
    alone.mkdir()
    assert repository_prefix(str(alone)) == ""  # in no repository
    git(alone, "init", "-q")
    assert repository_prefix(str(alone)) == ""  # the top of its own
    assert repository_prefix(str(tmp_path / "gone")) == "" and repository_prefix(None) == ""
    patch = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    assert prefix_paths(patch, "") == patch
    assert prefix_paths(patch, "p/") == patch.replace(b"a/x", b"a/p/x").replace(b"b/x", b"b/p/x")
