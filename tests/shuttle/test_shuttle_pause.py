"""``shuttle project pause|status|resume`` against a real Weft: the pause recorded with who
and why, a second one refused naming the field, and the hold shown in ``shuttle fleet``."""

from __future__ import annotations

from shuttle_helpers import Cli


def test_an_operator_pauses_and_resumes_the_project_from_the_shell(cli: Cli) -> None:
    running = cli("project", "status")
    assert running.exit_code == 0 and "is not paused" in running.stdout
    paused = cli.json("project", "pause", "--reason", "release freeze", "--by", "ana")
    assert (paused["paused"]["by"], paused["paused"]["reason"]) == ("ana", "release freeze")
    shown = cli("project", "status")
    assert "is paused by ana" in shown.stdout and "release freeze" in shown.stdout
    again = cli("project", "pause")
    assert again.exit_code != 0 and "paused" in again.stderr and "resume it first" in again.stderr
    fleet = cli("fleet")
    assert fleet.exit_code == 0 and "paused by ana" in fleet.stdout
    bad = cli("project", "pause", "--by", "Not A Handle")
    assert bad.exit_code != 0 and "by" in bad.stderr and "Not A Handle" not in bad.stderr
    resumed = cli("project", "resume")
    assert resumed.exit_code == 0 and "is not paused" in resumed.stdout
    twice = cli("project", "resume")
    assert twice.exit_code != 0 and "not paused" in twice.stderr
    stopping = cli("project", "pause", "--stop-running", "--reason", "incident")
    assert stopping.exit_code == 0 and "running items stop at their next checkpoint" in stopping.stdout
    assert cli.json("project", "status")["paused"]["stop_running"] is True
    assert cli("project", "resume").exit_code == 0
