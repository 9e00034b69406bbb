"""Scenario 29: the operator in the loop. A project with an autonomy policy and three sinks
(a signed webhook, a Slack stand-in, SMTP), served by two Weft replicas: an agent's P0
security question blocks its item and reaches each sink once, is sent again as a reminder,
and is answered from the console; a P2 question is answered by its default; a target whose starts keep
failing is disabled and its sinks told; an item failing every attempt is escalated with a
report and completes after "retry with new instructions"; pausing the project refuses
claims."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
from playwright.async_api import Page, async_playwright, expect
from scenario_harness import Fabric, agents_in, text_of

from shared.signing import signed
from testsupport.browser import CHROMIUM_ARGS, chromium_path
from testsupport.receivers import Receiver, http_receiver_in_thread, slack_to, smtp_server

SECRET = "scenario-hook-secret-29"
SLACK = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7/#ops"
PUBLIC = "https://loom.example.com"
POLICY = {"rules": [{"category": "security", "mode": "sync"}], "bypass_after_s": 1, "renotify_s": 5}
SINKS: dict[str, dict[str, Any]] = {
    "hook": {"url": "{receiver}/hook", "kind": "webhook", "secret": SECRET},
    "chat": {"url": SLACK, "min_priority": "P0", "events": ["question", "reminder"]},
    "mail": {"url": "{mail}", "min_priority": "P0", "events": ["question"]},
}


async def test_questions_reach_people_once_defaults_decide_a_breaker_trips_and_pause_holds(
    fabric: Fabric, weft_factory: Any
) -> None:
    with (
        http_receiver_in_thread() as receiver,
        smtp_server() as mailbox,
        slack_to(receiver),
        weft_factory(public_url=PUBLIC) as one,
        weft_factory(public_url=PUBLIC),  # a second replica on the same NATS
    ):
        ops = fabric.served_by(one)
        async with ops.api() as api:  # Shuttle's own commands for these: tests/shuttle
            assert (await api.put("/api/autonomy", json=POLICY)).status_code == 200
            for name, sink in SINKS.items():
                sink = {**sink, "url": sink["url"].format(receiver=receiver.url, mail=mailbox.url())}
                assert (await api.put(f"/api/notify/sinks/{name}", json=sink)).status_code == 200

        item = await ops.shuttle_json("submit", "rotate the signing key", "-c", "code")
        async with AsyncExitStack() as stack:
            agents = await agents_in(stack, ops, {"builder": {"capabilities": ["code"]}})
            builder = agents["builder"]
            assert (await builder.claim())["id"] == item["id"]  # type: ignore[index]

            # P0 security: the item waits, and each sink hears of it once (two replicas).
            asked = await builder.call(
                "warp_question_ask",
                question="Commit the new key to the repository?",
                choices=["no", "yes"],
                work_id=item["id"],
                priority="P0",
                category="security",
            )
            question_id = asked["question"]["id"]
            assert asked["question"]["mode"] == "sync"
            assert (await ops.shuttle_json("work", "show", item["id"]))["status"] == "waiting-on-operator"
            hook = (await receiver.wait_for("/hook"))[0]
            assert signed(SECRET, hook.body, hook.headers.get("x-loom-signature-256"))
            assert (hook.json()["subject_id"], hook.json()["link"]) == (question_id, f"{PUBLIC}/#questions")
            assert "Commit the new key" in str((await receiver.wait_for("/slack"))[0].json())
            mail = (await mailbox.wait_for())[0]
            assert mail["Subject"] == f"[P0] {builder.handle} asks (security)"

            # Nobody answers: five seconds on, everyone is reminded (once, by one replica).
            reminders = await receiver.wait_for("/hook", 2, timeout=20)
            assert reminders[1].json()["kind"] == "reminder"
            await receiver.wait_for("/slack", 2)
            assert len(mailbox.messages) == 1  # the mail sink takes questions, not reminders

            # Answered from the console (headless Chromium), where the link in the notice leads.
            async with console_page() as page:
                await page.goto(f"{one.url}/?project={ops.project_id}#questions")
                asked_here = page.locator(f'#open-questions article[data-question-id="{question_id}"]')
                await expect(asked_here).to_contain_text("Commit the new key to the repository?")
                await asked_here.get_by_label("Answer", exact=True).select_option("no")
                await asked_here.get_by_role("button", name="Send answer").click()
                await expect(asked_here).to_have_count(0)
            read = await builder.call("warp_question_get", question_id=question_id, wait_s=5)
            assert (read["question"]["answer"], read["question"]["answered_by"]) == ("no", "operator")
            assert (await ops.shuttle_json("work", "show", item["id"]))["status"] == "in-progress"

            # P2 with a default: nobody answers within a second, the default decides.
            minor = await builder.call(
                "warp_question_ask",
                question="Bump the patch version too?",
                work_id=item["id"],
                priority="P2",
                default_answer="yes",
            )
            assert minor["question"]["mode"] == "bypass"
            decided = await builder.call("warp_question_get", question_id=minor["question"]["id"], wait_s=15)
            assert (decided["question"]["answer"], decided["question"]["answered_by"]) == ("yes", "policy")
            assert all(
                r.json()["subject_id"] != minor["question"]["id"] for r in receiver.at("/hook")
            )  # floor P1

            # A target that cannot start: after three failed starts it is disabled and the hook told.
            added = await ops.shuttle(
                "targets", "add", "broken", "-m", "local", "--command", "/nonexistent/agent", "-c", "code"
            )
            assert added.exit_code == 0, added.stderr
            async with ops.api() as api:
                for _ in range(3):
                    started = await _start(api, "broken")
                    assert started.status_code in (200, 201, 202), started.text
                    await _ended(api)
            tripped = await _notices(receiver, "target")
            assert len(tripped) == 1 and "broken" in tripped[0]["title"]
            shown = await ops.shuttle_json("targets", "show", "broken")
            assert shown["enabled"] is False and shown["tripped_reason"].startswith("3 starts failed")

            done = await builder.call("warp_work_complete", work_id=item["id"], result={"committed": False})
            assert done["item"]["status"] == "completed"

            # An item that fails every attempt: its last attempt is handed only the essentials;
            # then a report and a question, whose "retry with new instructions" leads to completion.
            flaky = await ops.shuttle_json("submit", "fix the build", "-c", "code", "--max-attempts", "2")
            for attempt in (1, 2):
                claimed = await builder.call("warp_work_claim")
                assert claimed["item"]["id"] == flaky["id"]
                assert claimed["context"]["simplified"] is (attempt == 2)
                await builder.call("warp_work_fail", work_id=flaky["id"], error=f"linker OOM ({attempt})")
            escalation = (await _notices(receiver, "question", about=flaky["id"]))[0]
            assert escalation["title"].startswith("[P1] Escalation: work")
            shown = await ops.shuttle_json("work", "show", flaky["id"])
            report = shown["escalation"]["report"]
            assert [a["error"] for a in report["attempts"]] == ["linker OOM (1)", "linker OOM (2)"]
            retry = await ops.shuttle(
                "answer", escalation["subject_id"], "retry: link with -Wl,--no-keep-memory", "--by", "alice"
            )
            assert retry.exit_code == 0, retry.stderr
            again = await builder.call("warp_work_claim")
            assert again["item"]["id"] == flaky["id"] and again["context"]["simplified"] is False
            assert again["item"]["description"].endswith("link with -Wl,--no-keep-memory")
            fixed = await builder.call("warp_work_complete", work_id=flaky["id"], result="linked")
            assert fixed["item"]["status"] == "completed"
            sent = [r for r in receiver.at("/hook") if r.json()["subject_id"] == escalation["subject_id"]]
            assert len(sent) == 1  # two replicas, one notice

            # Paused: the agent's next claim is refused with the reason; resumed, it goes on.
            assert (await ops.shuttle("project", "pause", "--reason", "key rotation review")).exit_code == 0
            for _ in range(100):  # agents read the pause within a couple of seconds (nothing is queued)
                refused = await builder.raw("warp_work_claim")
                if refused.is_error:
                    break
                assert (refused.structured_content or {})["claimed"] is False
                await asyncio.sleep(0.1)
            await ops.shuttle("submit", "another task", "-c", "code")
            refused = await builder.raw("warp_work_claim")
            assert refused.is_error and "key rotation review" in text_of(refused)
            assert (await ops.shuttle("project", "resume")).exit_code == 0
            for _ in range(100):  # agents read the pause within a couple of seconds
                result = await builder.raw("warp_work_claim")
                if not result.is_error:
                    break
                await asyncio.sleep(0.1)
            assert not result.is_error, text_of(result)
            assert (result.structured_content or {})["claimed"] is True


@asynccontextmanager
async def console_page() -> AsyncIterator[Page]:
    """A page of Debian's chromium, headless (as the console's own tests drive it)."""
    path = chromium_path()
    assert path is not None, "scenario 29 answers from the console: apt-get install chromium (make install)"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield await browser.new_page()
        finally:
            await browser.close()


async def _notices(
    receiver: Receiver, kind: str, timeout: float = 20.0, *, about: str | None = None
) -> list[dict[str, Any]]:
    """The signed webhook's notices of ``kind`` (whose body names ``about``), once there is one."""
    for _ in range(int(timeout / 0.05)):
        found = [
            r.json()
            for r in receiver.at("/hook")
            if r.json()["kind"] == kind and (about is None or about in r.json()["body"])
        ]
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {kind} notice reached the webhook in {timeout} s")


TRANSIENT_REFUSALS = ("already starting", "max_concurrent", "try again")


async def _start(api: httpx.AsyncClient, target: str) -> httpx.Response:
    """A manual start, asked again while the target's slot still holds the last (failed) one.

    The operation is marked failed before its slot lets it go: the in-flight mark a moment
    later, its place among the live agents once its stop has run (in the background, later
    still on a loaded machine). Meanwhile Weft answers 409 "already starting" or "already runs
    1 of max_concurrent 1"; any other refusal (a target disabled too early) is returned."""
    for _ in range(300):
        response = await api.post(f"/api/targets/{target}/spin-up", json={})
        if response.status_code != 409 or not any(t in response.text for t in TRANSIENT_REFUSALS):
            return response
        await asyncio.sleep(0.1)
    return response


async def _ended(api: httpx.AsyncClient) -> None:
    """Until no spin-up of the project is still on its way (each of these fails at once)."""
    for _ in range(200):
        listed = (await api.get("/api/spinups")).json()["items"]
        if all(op["state"] in ("failed", "timed-out", "stopped") for op in listed):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("a spin-up did not end")
