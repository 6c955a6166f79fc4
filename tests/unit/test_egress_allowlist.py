"""The egress allowlist: what an entry may say (errors at load, with the line), which hosts and
ports it lets through, and the address checks the proxy makes after resolving a name itself."""

from __future__ import annotations

import pytest

from activities.code.commands import CommandRun, ending
from activities.loops.egress.allowlist import Allowlist
from activities.loops.run_record import RunOutcome
from config.coding import CodingSpec
from config.egress import parse_host_rule
from config.loader import AgentConfigError
from config.loop import parse_loop
from surfaces.cli import loop_doctor
from surfaces.cli.loop_views import report_lines
from workflows.egress_report import AllowedEgress, BlockedEgress, EgressReport, egress_lines
from workflows.loop_progress import LoopProgress
from workflows.loop_types import CommandResult, Limits, Outcome, RoundReport, RoundVerdict, Step

LOOP = """\
apiVersion: openloop.ai/v1alpha1
kind: Loop
metadata: {name: egress}
spec:
  mission: {objective: Make the tests pass}
  repo: {github: acme/api}
  commands: {verify: python -m pytest -q}
  sandbox:
    network:
"""


def _loop(*entries: str) -> str:
    return LOOP + "".join(f"      - {entry}\n" for entry in entries)


def test_a_list_of_hosts_loads_and_true_and_false_keep_their_meaning() -> None:
    entries = [
        "pypi.org",
        "files.pythonhosted.org",
        "'*.github.com'",
        "api.internal:8443",
        "'127.0.0.1:8080'",
    ]
    spec = parse_loop(_loop(*entries), "loop.yaml")
    assert spec.sandbox.network == [e.strip("'") for e in entries]
    on = parse_loop(LOOP.replace("network:\n", "network: true\n"), "loop.yaml")
    off = parse_loop(LOOP.replace("network:\n", "network: false\n"), "loop.yaml")
    assert on.sandbox.network is True and off.sandbox.network is False


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("'*'", "'*' would allow every host; list the hosts, or use `network: true`"),
        ("'pypi.org:70000'", "'pypi.org:70000' has port 70000, out of range: ports are 1 to 65535"),
        ("'pypi.org:0'", "'pypi.org:0' has port 0, out of range"),
        ("'pypi.org:http'", "'pypi.org:http' has port 'http', which is not a number"),
        (
            "'https://pypi.org/simple'",
            "'https://pypi.org/simple' is a URL, not a host; write the host alone: pypi.org",
        ),
        ("'git*.com'", "'git*.com' is not a host name or pattern (only as the whole first label"),
        ("'a..b'", "'a..b' is not a host name or pattern (letters, digits and '-')"),
        ("'999.1.1.1'", "looks like an address but is not a valid one"),
    ],
)
def test_a_bad_entry_is_named_at_its_file_line_and_field(entry: str, problem: str) -> None:
    with pytest.raises(AgentConfigError) as caught:
        parse_loop(_loop("pypi.org", entry), "loops/egress.yaml")
    [said] = [str(p) for p in caught.value.problems]
    assert said.startswith("loops/egress.yaml:11: spec.sandbox.network[1]: ")
    assert problem in said


def test_shapes_that_are_not_an_allowlist_say_what_to_write() -> None:
    for network, problem in [
        ("[]", "an empty allowlist allows nothing: write `network: false`"),
        ("[8080]", "write true, false or a list of hosts"),
    ]:
        with pytest.raises(AgentConfigError) as caught:
            parse_loop(LOOP.replace("network:\n", f"network: {network}\n"), "loop.yaml")
        assert problem in str(caught.value.problems[0])
    unconfined = LOOP.replace("  sandbox:\n", "  sandbox:\n    provider: none\n") + "      - pypi.org\n"
    with pytest.raises(AgentConfigError) as caught:
        parse_loop(unconfined, "loop.yaml")
    assert "an allowlist needs `provider: bubblewrap`" in str(caught.value.problems[0])


def test_an_agents_coding_sandbox_takes_the_same_allowlist() -> None:
    setup = CodingSpec.model_validate({"sandbox": {"network": ["pypi.org", "*.github.com"]}})
    assert setup.sandbox.network == ["pypi.org", "*.github.com"]
    with pytest.raises(ValueError, match=r"network\.1: '\*' would allow every host"):
        CodingSpec.model_validate({"sandbox": {"network": ["pypi.org", "*"]}})


def test_entries_parse_into_names_patterns_addresses_and_ports() -> None:
    assert parse_host_rule("PyPI.org.").name == "pypi.org"
    assert parse_host_rule("*.github.com").suffix == "github.com"
    v6 = parse_host_rule("[::1]:8443")
    assert str(v6.address) == "::1" and v6.port == 8443
    assert parse_host_rule("::1").port is None
    assert parse_host_rule("api.internal:8443").port == 8443


def _resolver(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    async def lookup(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError("no such name")
        return table[host]

    return lookup


PUBLIC = {
    "pypi.org": ["151.101.0.223"],
    "api.github.com": ["140.82.112.6"],
    "github.com": ["140.82.112.4"],
    "rebind.example": ["127.0.0.1"],
    "inside.example": ["10.1.2.3"],
    "mixed.example": ["151.101.0.1", "192.168.1.9"],
    "internal.example": ["10.0.0.5"],
    "localhost": ["127.0.0.1", "::1"],
    "mapped.example": ["::ffff:127.0.0.1"],
}


async def _why(entries: list[str], host: str, port: int) -> str:
    verdict = await Allowlist(entries, _resolver(PUBLIC)).check(host, port)
    return "allowed" if verdict.allowed else verdict.reason


async def test_names_match_exactly_or_below_a_pattern_on_80_and_443_unless_a_port_is_named() -> None:
    entries = ["pypi.org", "*.github.com", "internal.example:8443", "10.0.0.5:8443"]
    assert await _why(entries, "pypi.org", 443) == "allowed"
    assert await _why(entries, "PYPI.ORG.", 80) == "allowed"
    assert await _why(entries, "api.github.com", 443) == "allowed"
    assert await _why(entries, "github.com", 443) == "not in the allowlist"  # the pattern is below it
    assert await _why(entries, "evil.example", 443) == "not in the allowlist"
    assert await _why(entries, "pypi.org.evil.example", 443) == "not in the allowlist"
    assert (
        await _why(entries, "pypi.org", 22)
        == "port 22 is not allowed: the allowlist gives this host port 80, 443"
    )
    assert (await _why(entries, "internal.example", 443)).startswith("port 443 is not allowed")
    # A private address resolved from a listed name passes only when the address is listed too.
    assert await _why(entries, "internal.example", 8443) == "allowed"


async def test_addresses_and_rebinding_are_refused_unless_listed() -> None:
    entries = [
        "pypi.org",
        "rebind.example",
        "inside.example",
        "mixed.example",
        "mapped.example",
        "127.0.0.1:8080",
    ]
    # The address of an allowed name, asked for without the name.
    assert (await _why(entries, "151.101.0.223", 443)).startswith(
        "not in the allowlist: an address is allowed"
    )
    # A listed name that resolves to loopback, a private range, or a private address among public ones.
    assert (
        await _why(entries, "rebind.example", 443)
        == "resolves to 127.0.0.1, a private address that is not listed"
    )
    assert (
        await _why(entries, "inside.example", 80)
        == "resolves to 10.1.2.3, a private address that is not listed"
    )
    assert (
        await _why(entries, "mixed.example", 443)
        == "resolves to 192.168.1.9, a private address that is not listed"
    )
    assert (await _why(entries, "mapped.example", 443)).startswith("resolves to 127.0.0.1")
    assert await _why(entries, "localhost", 8080) == "not in the allowlist"
    # An address listed itself, on its port only; localhost listed by name reaches loopback.
    assert await _why(entries, "127.0.0.1", 8080) == "allowed"
    assert await _why(entries, "127.0.0.1", 8081) == "port 8081 is not allowed for 127.0.0.1"
    assert await _why(["localhost:8080"], "localhost", 8080) == "allowed"
    assert (await _why(["localhost:8080"], "127.0.0.1", 8080)).startswith("not in the allowlist")
    assert await _why(["nowhere.example"], "nowhere.example", 443) == "the name does not resolve"


async def test_the_proxy_connects_to_the_addresses_it_checked() -> None:
    calls: list[str] = []

    async def lookup(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["151.101.0.223"] if len(calls) == 1 else ["127.0.0.1"]

    verdict = await Allowlist(["pypi.org"], lookup).check("pypi.org", 443)
    assert (
        verdict.allowed and [str(a) for a in verdict.addresses] == ["151.101.0.223"] and calls == ["pypi.org"]
    )


def _result(step: Step, egress: EgressReport | None, outcome: Outcome = Outcome.FAILED) -> CommandResult:
    return CommandResult(
        step=step, round=1, command="pip install x", outcome=outcome, exit_code=1, duration_s=1.0,
        output_bytes=0, output_id=None, tail="", failing_tests=["t::x"], egress=egress,
    )  # fmt: skip


def test_a_round_note_names_what_the_allowlist_blocked() -> None:
    report = EgressReport(
        allowlist=["pypi.org"],
        blocked=[BlockedEgress(host="evil.example", port=443, reason="not in the allowlist", count=3)],
        allowed=[AllowedEgress(host="pypi.org", port=443, connections=2, bytes_in=1_200_000, bytes_out=4000)],
    )
    assert egress_lines(report) == [
        "blocked: evil.example:443 ×3 (not in the allowlist)",
        "allowed: pypi.org 1.2 MB",
    ]
    judged = LoopProgress(Limits(), None, has_fixer=False).judge([_result(Step.VERIFY, report)])
    assert judged.verdict is RoundVerdict.FAILED
    assert judged.note == (
        "verify failed; verify blocked: evil.example:443 from `pip install` ×3 (not in the allowlist)"
    )
    quiet = LoopProgress(Limits(), None, has_fixer=False).judge([_result(Step.VERIFY, None)])
    assert quiet.note == "verify failed"


def test_loops_report_lists_each_commands_blocked_and_allowed_hosts() -> None:
    report = EgressReport(
        blocked=[BlockedEgress(host="evil.example", port=443, reason="not in the allowlist", count=2)],
        allowed=[AllowedEgress(host="pypi.org", port=443, connections=1, bytes_in=2048, bytes_out=512)],
    )
    verify = _result(Step.VERIFY, report)
    round_ = RoundReport(
        loop_id="l", round=1, commands=[verify], failing_tests=None, verdict=RoundVerdict.FAILED
    )
    lines = report_lines(round_)
    assert "           blocked: evil.example:443 from `pip install` ×2 (not in the allowlist)" in lines
    assert "           allowed: pypi.org 2.6 kB" in lines


def test_loops_doctor_says_where_the_network_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_doctor, "sandbox_problem", lambda: None)
    spec = parse_loop(_loop("pypi.org", "'*.github.com'"), "loop.yaml")
    check = loop_doctor.sandbox_check(spec)
    assert check.ok and check.detail == (
        "bubblewrap works here; network only to pypi.org, *.github.com, through the worker's egress proxies"
    )


def test_a_coding_command_tells_the_model_what_was_blocked() -> None:
    report = EgressReport(
        blocked=[BlockedEgress(host="evil.example", port=443, reason="not in the allowlist")]
    )
    ended = RunOutcome(Outcome.FAILED, 1, 0.5, 10, "", "exit code 1", True, report)
    said = ending(CommandRun("pip install x", ended, "", 1))
    assert said == (
        "exit code 1, failed after 0.5 s; "
        "the sandbox's network allowlist blocked: evil.example:443 (not in the allowlist)"
    )
