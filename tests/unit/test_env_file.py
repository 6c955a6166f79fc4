"""`sandbox.env_file`: how a dotenv file is read, what its errors say (never a value), how its
values are masked in output, and what the doctors print about it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from activities.loops.env_file import EnvFileError, mask, mask_bytes, parse_env, read_env_file
from activities.store.agents import StoredAgent
from config.loader import parse_agent
from config.loop import parse_loop
from config.settings import Settings
from surfaces.cli.doctor import env_file_checks
from surfaces.cli.env_file_check import env_file_check
from surfaces.cli.loop_doctor import Check as LoopCheck
from surfaces.cli.loop_doctor import doctor as loop_doctor

SECRET = "ghp_abcdefghijklmnop0123"
CODER = Path(__file__).resolve().parents[2] / "config" / "agents" / "coder.yaml"


def test_dotenv_forms_are_read_as_dotenv_files_are_everywhere() -> None:
    text = (
        "# a comment\n"
        "API_TOKEN=plain-value\n"
        'export QUOTED="two words"  # trailing comment\n'
        "SINGLE='${HOME} stays as written'\n"
        'MULTI="line one\nline two"\n'
        "EMPTY=\n"
    )
    env = parse_env(text)
    assert env.problems == []
    assert env.values == {
        "API_TOKEN": "plain-value",
        "QUOTED": "two words",
        "SINGLE": "${HOME} stays as written",
        "MULTI": "line one\nline two",
        "EMPTY": "",
    }
    assert env.lines["MULTI"] == 5 and env.lines["EMPTY"] == 7


def test_a_worker_variable_is_never_interpolated_into_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_ONLY", "the-worker-s-own")
    env = parse_env("FROM_WORKER=${WORKER_ONLY}\nALSO=$WORKER_ONLY\n")
    assert "the-worker-s-own" not in env.values.values()


def test_a_bad_line_is_named_by_number_and_never_repeated() -> None:
    # A value pasted on a line of its own is the usual slip: its text must not reach a message.
    env = parse_env(f'GOOD=1\n{SECRET}\nnot-a-name=x\n\'unclosed=\nNUL="a\0b"\n')
    assert env.values == {"GOOD": "1"}
    assert env.problems == [
        "line 2: no `=`; write KEY=value, or KEY= for an empty value",
        "line 3: the key is not a variable name (letters, digits and _)",
        "line 4: cannot be read as KEY=value",
        "line 5: the value holds a NUL character, which no variable can",
    ]
    assert not any(SECRET in problem or "not-a-name" in problem for problem in env.problems)


def test_reading_fails_with_the_file_named_and_no_value(tmp_path: Path) -> None:
    missing = tmp_path / "dev.env"
    with pytest.raises(EnvFileError, match=f"the sandbox's env_file {missing} does not exist on this worker"):
        read_env_file(str(missing))
    with pytest.raises(EnvFileError, match="is not a file"):
        read_env_file(str(tmp_path))
    missing.write_text(f"TOKEN={SECRET}\n{SECRET}\n")
    with pytest.raises(EnvFileError) as raised:
        read_env_file(str(missing))
    assert str(raised.value) == (
        f"the sandbox's env_file {missing}: line 2: no `=`; write KEY=value, or KEY= for an empty value"
    )
    missing.write_bytes(b"TOKEN=\xff\xfe\n")
    with pytest.raises(EnvFileError, match="is not UTF-8 text"):
        read_env_file(str(missing))


def test_values_of_eight_characters_or_more_are_masked_whole_longest_first() -> None:
    secrets = parse_env(f"TOKEN={SECRET}\nPREFIX=ghp_abcdefgh\nPORT=8443\n").secrets()
    assert secrets == [SECRET, "ghp_abcdefgh"]  # the short port is left alone
    said = f"using {SECRET} on port 8443, then ghp_abcdefgh"
    assert mask(said, secrets) == "using *** on port 8443, then ***"
    assert mask_bytes(said.encode(), secrets) == b"using *** on port 8443, then ***"


def test_the_doctor_names_keys_empty_values_and_shadowed_variables(tmp_path: Path) -> None:
    path = tmp_path / "dev.env"
    path.write_text(f"API_TOKEN={SECRET}\nPATH=/opt/bin\nOPENLOOP_ROUND=9\nPIP_INDEX_URL=https://x\n")
    ok, detail = env_file_check(str(path), env_from=["PIP_INDEX_URL"])
    assert ok
    assert detail == (
        f"{path}: 4 key(s): API_TOKEN, PATH, OPENLOOP_ROUND, PIP_INDEX_URL; "
        "PATH replace(s) the sandbox's own (commands may not find their tools); "
        "OPENLOOP_ROUND ignored: each command's step sets it; "
        "PIP_INDEX_URL also in env_from: the worker's value wins"
    )
    path.write_text(f"API_TOKEN={SECRET}\nDB_PASSWORD=\n")
    ok, detail = env_file_check(str(path), env_from=[])
    assert not ok
    assert detail == f"{path}: no value for DB_PASSWORD (line 2): fill it in, or remove the line"
    ok, detail = env_file_check(str(tmp_path / "nope.env"), env_from=[])
    assert not ok and detail == (
        f"the sandbox's env_file {tmp_path / 'nope.env'} does not exist here "
        "(the loop worker reads it as each command starts)"
    )
    assert SECRET not in detail


async def test_loops_doctor_and_doctor_check_the_env_file_they_name(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "dev.env").write_text(f"API_TOKEN={SECRET}\nHOME=/srv\n")
    loop = (
        "apiVersion: openloop.ai/v1alpha1\nkind: Loop\nmetadata: {name: demo}\nspec:\n"
        "  mission: {objective: pass}\n  repo: {path: ./project}\n  commands: {verify: echo ok}\n"
        "  sandbox: {env_file: secrets/dev.env}\n"
    )
    spec = parse_loop(loop, "loop.yaml", tmp_path)
    checks = {check.name: check for check in await loop_doctor(spec, Settings())}
    path = tmp_path / "secrets" / "dev.env"
    assert checks["env file"] == LoopCheck(
        "env file",
        True,
        f"{path}: 2 key(s): API_TOKEN, HOME; "
        "HOME replace(s) the sandbox's own (commands may not find their tools)",
    )

    coder = CODER.read_text().replace(
        "sandbox: {provider: bubblewrap, network: false}", f"sandbox: {{env_file: {tmp_path}/missing.env}}"
    )
    agent = StoredAgent(parse_agent(coder, "coder.yaml"), 1, datetime.now(UTC), "sha")
    [check] = env_file_checks([agent])
    assert (check.name, check.ok) == ("env file of coder", False)
    assert check.detail.startswith(f"the sandbox's env_file {tmp_path}/missing.env does not exist here")
