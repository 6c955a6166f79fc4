"""The loop worker's setup cache on real files and real git: which changes make a new key,
what a restore rewrites when the workspace has moved, what it refuses, which folders the byte
budget evicts, and that what setup made never enters a diff."""

from __future__ import annotations

import os
import time
from pathlib import Path

from activities.loops import setup_cache, workspace
from workflows.loop_types import Sandbox
from workflows.setup_types import SandboxSetup

SETUP = Sandbox(setup=SandboxSetup(commands=["python -m venv .venv"], network=["pypi.org"]))


async def _workspace(tmp_path: Path, name: str, **files: str) -> Path:
    source = tmp_path / f"{name}-source"
    for relative, text in {"calc.py": "x = 1\n", "requirements.txt": "pytest\n", **files}.items():
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_text(text)
    path = tmp_path / name / "repo"
    await workspace.copy_local(source, path)
    return path


async def test_the_key_follows_the_repository_lockfiles_and_setup_not_other_files(tmp_path: Path) -> None:
    base = await _workspace(tmp_path, "a")
    key = await setup_cache.cache_key(base, "github:acme/demo", SETUP)

    other_code = await _workspace(tmp_path, "b", **{"calc.py": "x = 2\n"})
    assert await setup_cache.cache_key(other_code, "github:acme/demo", SETUP) == key
    assert await setup_cache.cache_key(base, "github:acme/other", SETUP) != key
    pinned = await _workspace(tmp_path, "c", **{"requirements.txt": "pytest==8.3\n"})
    assert await setup_cache.cache_key(pinned, "github:acme/demo", SETUP) != key
    nested = await _workspace(tmp_path, "d", **{"web/package-lock.json": "{}\n"})
    assert await setup_cache.cache_key(nested, "github:acme/demo", SETUP) != key
    assert SETUP.setup is not None
    more = SETUP.model_copy(update={"setup": SETUP.setup.model_copy(update={"network": ["example.org"]})})
    assert await setup_cache.cache_key(base, "github:acme/demo", more) != key
    # The loop commands' own network is not part of it: the same setup serves both.
    wider = SETUP.model_copy(update={"network": True})
    assert await setup_cache.cache_key(base, "github:acme/demo", wider) == key


async def test_a_restored_venv_names_its_new_workspace(tmp_path: Path) -> None:
    old, new, cache = tmp_path / "loop-a" / "repo", tmp_path / "loop-b" / "repo", tmp_path / "cache"
    (old / ".venv" / "bin").mkdir(parents=True)
    (old / ".venv" / "lib").mkdir()
    new.mkdir(parents=True)
    (old / ".venv" / "bin" / "pip").write_text(f"#!{old}/.venv/bin/python\nimport pip\n")
    (old / ".venv" / "lib" / "_editable.pth").write_text(f"{old}/src\n")
    (old / ".venv" / "lib" / "longer.txt").write_text(f"{old}-2/elsewhere\n")  # another path
    (old / ".venv" / "lib" / "mod.pyc").write_bytes(b"\x00\x01" + f"{old}/mod.py".encode())
    os.symlink(f"{old}/.venv/bin/pip", old / ".venv" / "bin" / "pip3")
    (old / "node.log").write_text("made\n")
    cache.mkdir()

    said = await setup_cache.save(cache, "k1", old, [".venv/", "node.log"], 3.5, 1 << 20)
    assert said.startswith("cached (")
    restored = await setup_cache.restore(cache, "k1", new)

    assert restored is not None and restored.entries == [".venv/", "node.log"] and restored.duration_s == 3.5
    assert (new / ".venv" / "bin" / "pip").read_text() == f"#!{new}/.venv/bin/python\nimport pip\n"
    assert (new / ".venv" / "lib" / "_editable.pth").read_text() == f"{new}/src\n"
    assert (new / ".venv" / "lib" / "longer.txt").read_text() == f"{old}-2/elsewhere\n"
    assert not (new / ".venv" / "lib" / "mod.pyc").exists()  # compiled again from its source
    assert os.readlink(new / ".venv" / "bin" / "pip3") == f"{new}/.venv/bin/pip"
    assert (new / "node.log").read_text() == "made\n"
    # The cache kept its own copy: the restore wrote nothing back into it.
    assert (cache / "k1" / "files" / ".venv" / "bin" / "pip").read_text().startswith(f"#!{old}/")


async def test_a_restore_never_writes_through_a_link_or_over_a_file(tmp_path: Path) -> None:
    old, cache, outside = tmp_path / "a", tmp_path / "cache", tmp_path / "outside"
    (old / "lib" / "build").mkdir(parents=True)
    (old / "lib" / "build" / "out.txt").write_text("built\n")
    cache.mkdir()
    outside.mkdir()
    assert (await setup_cache.save(cache, "k", old, ["lib/build/"], 1.0, 1 << 20)).startswith("cached")

    linked = tmp_path / "b"
    linked.mkdir()
    os.symlink(outside, linked / "lib")  # a repository may commit a link where a folder was
    assert await setup_cache.restore(cache, "k", linked) is None
    assert list(outside.iterdir()) == []

    taken = tmp_path / "c"
    (taken / "lib" / "build").mkdir(parents=True)
    assert await setup_cache.restore(cache, "k", taken) is None
    assert list((taken / "lib" / "build").iterdir()) == []


async def test_the_least_recently_used_go_past_the_byte_budget(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in ("one", "two", "three"):
        made = tmp_path / name
        (made / ".venv").mkdir(parents=True)
        (made / ".venv" / "blob").write_bytes(b"x" * 1000)
        assert (await setup_cache.save(cache, name, made, [".venv/"], 1.0, 2500)).startswith("cached")
        if name == "two":
            past = time.time() - 60
            os.utime(cache / "one" / setup_cache.USED, (past, past))
            os.utime(cache / "two" / setup_cache.USED, (past - 60, past - 60))
    assert sorted(p.name for p in cache.iterdir()) == ["one", "three"]  # two was used least recently

    big = tmp_path / "big"
    (big / ".venv").mkdir(parents=True)
    (big / ".venv" / "blob").write_bytes(b"x" * 3000)
    said = await setup_cache.save(cache, "big", big, [".venv/"], 1.0, 2500)
    assert said.startswith("not cached: 3.0 kB is more than OPENLOOP_SETUP_CACHE_MB allows")


async def test_a_second_save_of_the_same_key_keeps_the_first(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    for text in ("first", "second"):
        made = tmp_path / text
        made.mkdir()
        (made / "out.txt").write_text(text)
        await setup_cache.save(cache, "same", made, ["out.txt"], 1.0, 1 << 20)
    assert (cache / "same" / "files" / "out.txt").read_text() == "first"
    assert [p.name for p in cache.iterdir()] == ["same"]  # no half-written folder left


async def test_what_setup_made_stays_out_of_the_diff(tmp_path: Path) -> None:
    path = await _workspace(tmp_path, "w")
    base = (await workspace.workspace_git(path, "rev-parse", "HEAD")).decode().strip()
    before = await setup_cache.untracked(path)
    (path / ".venv" / "bin").mkdir(parents=True)
    (path / ".venv" / "bin" / "python").write_text("#!\n")
    (path / "setup[1].log").write_text("made\n")
    made = sorted(await setup_cache.untracked(path) - before)
    assert made == [".venv/", "setup[1].log"]

    setup_cache.exclude(workspace.git_dir(path), made)
    (path / "calc.py").write_text("x = 3\n")
    patch = (await workspace.diff(path, base)).decode()
    assert "calc.py" in patch and ".venv" not in patch and "setup[1].log" not in patch
