"""``loom-lander``: the agent that lands approved work on the target branch (docs/landing.md).

A lander is an agent like any other (registered, heartbeating, claiming through the
work queue, with Warp's runtime and identity) that speaks no MCP: it claims the items
queued for landing (capability ``land``) and runs the git steps and the gate on its own
host (:mod:`shared.git.landing`). Landing stays out of Weft's process, scales with the
landers, and survives their crashes: a lander's claims lapse like any agent's, and what
it pushed before dying is found through the commit it recorded first.

One landing at a time per target: the lander takes the target's lock
(:mod:`shared.git.landlock`) before it claims a batch, renews it (and keeps its claims
alive) while it builds, gates and pushes, and frees it after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from shared.git.cli import GitFailed
from shared.git.forge import ForgeError, GitHub
from shared.git.landing import Candidate, DiffSummary, HostLanding, LandingError, Settled
from shared.git.landlock import LOCK_TTL_S, LandingLock, LandingLocks, LockLost
from shared.git.repository import Repository
from shared.loop import keep_startup_heap, run_main
from shared.models import MAX_QUESTION, LandingAttempt, WorkItem, WorkStatus
from shared.names import LAND_CAPABILITY
from shared.tasks import raise_if_cancelling, stop_task, tick
from shared.work.landing import needs_approval
from shared.work.rules import Claimant, WorkError
from warp.services import Services

if TYPE_CHECKING:
    from warp.runtime import WarpRuntime

log = logging.getLogger("loom.lander")

POLL_S: Final = 2.0
"""How often an idle lander looks for work (and for a lock another lander freed)."""
AGENT_TYPE: Final = "lander"
BACKOFF_MAX_S: Final = 30.0
"""The longest pause between rounds that keep failing for a reason not the items'."""


def next_pause(previous: float, *, poll_s: float, handled: int, gave_back: bool) -> float:
    """The wait before a lander's next round: none after a round that landed something (more
    may wait), ``poll_s`` after an idle one, and after rounds that gave their batch back
    twice the last pause each time, up to :data:`BACKOFF_MAX_S`."""
    if gave_back:
        return min(BACKOFF_MAX_S, max(poll_s, previous * 2))
    return 0.0 if handled else poll_s


def candidate_of(item: WorkItem) -> Candidate:
    """What the git steps need of an item queued for landing."""
    ws = item.workstream
    assert ws is not None and ws.head_sha is not None  # rule ``landable``: only such items land
    first_line = item.description.splitlines()[0] if item.description.strip() else ""
    title = f"{item.task_id}: {first_line}"[:120]
    pending = item.landing.pending_sha if item.landing is not None else None
    return Candidate(
        work_id=item.id, title=title, branch=ws.branch, head_sha=ws.head_sha, pending_sha=pending
    )


def approval_question(item: WorkItem, target: str, summary: DiffSummary) -> str:
    """The text of a lander's "land this?" (the coordinator's veto): the item, its commits
    and files against the target, whether it merges cleanly, and how to answer; cut to fit
    a question."""
    ws = item.workstream
    assert ws is not None  # rule ``landable``: only such items land
    state = f"conflicts in {', '.join(summary.conflicts)}" if summary.conflicts else "merges cleanly"
    head = [
        f"Land this? {candidate_of(item).title} (work {item.id})",
        f"{ws.branch} onto {target}: {ws.commits} commit(s), {ws.files_changed} file(s), "
        f"+{ws.insertions} -{ws.deletions}; it {state} now.",
        "",
        "Commits:",
        *(f"  {line}" for line in summary.commits),
        *([f"  ... and {summary.more_commits} more"] if summary.more_commits else []),
    ]
    foot = [
        "",
        'Answer "land" to land it; any other answer sends it back to its author with your '
        "answer as the reason.",
    ]
    files = ["", "Files:", summary.stat]
    text = "\n".join([*head, *files, *foot])
    if len(text) <= MAX_QUESTION:
        return text
    room = MAX_QUESTION - len("\n".join([*head, *foot])) - len("\n\nFiles:\n\n(cut)") - 2
    cut = summary.stat[: max(0, room)]
    return "\n".join([*head, "", "Files:", cut, "(cut)", *foot])[:MAX_QUESTION]


def _tasks(items: list[WorkItem]) -> str:
    return ", ".join(f"{i.task_id} ({i.id[:8]})" for i in items)


@dataclass
class _Batch:
    """The items one landing holds, and what it has settled of them."""

    items: dict[str, WorkItem]
    lock: LandingLock
    repository: Repository
    settled: set[str] = field(default_factory=set)
    landed: list[Candidate] = field(default_factory=list)
    lost: LockLost | None = None

    def open_ids(self) -> list[str]:
        return [work_id for work_id in self.items if work_id not in self.settled]


class Lander:
    """Lands batches for one project, on the host and folder it runs in."""

    def __init__(
        self,
        svc: Services,
        project_path: Path,
        *,
        poll_s: float = POLL_S,
        lock_ttl_s: float = LOCK_TTL_S,
        github_token: str | None = None,
    ) -> None:
        self.svc = svc
        self.github_token = github_token
        """Forge mode: the token this lander opens pull requests with (``LOOM_GITHUB_TOKEN``)."""
        self.project_path = project_path
        self.poll_s = poll_s
        self.lock_ttl_s = lock_ttl_s
        self.locks = LandingLocks(svc.js, svc.names)
        self.last: HostLanding | None = None
        """The git side of the last landing (its counters are what ``make bench`` reads)."""
        self.gave_back = False
        """The last round gave its batch back (the repository unreachable, say): wait before
        the next, longer each time, rather than claim the same items again at once."""

    @property
    def agent_id(self) -> str:
        return self.svc.agent_id

    def _claimant(self) -> Claimant:
        entry = self.svc.presence.entry
        return Claimant(
            agent_id=self.agent_id,
            agent_type=entry.agent_type if entry is not None else AGENT_TYPE,
            capabilities=(LAND_CAPABILITY,),
            boundaries=tuple(entry.boundaries) if entry is not None else ("default",),
            target_id=entry.target_id if entry is not None else None,
        )

    def _host(self, repository: Repository) -> HostLanding:
        """The git side of a landing on this host, committing as this lander."""
        return HostLanding(self.project_path, repository, author=("Loom lander", f"{self.agent_id}@loom"))

    async def run_once(self) -> int:
        """Take the lock, claim a batch and land it: the number of items it handled (0: no
        repository, the lock is someone else's, or nothing waits)."""
        repository = await self.svc.workstreams.repositories.get()
        if repository is None or not repository.enabled:
            return 0
        lock = await self.locks.acquire(repository.target_branch, self.agent_id, ttl_s=self.lock_ttl_s)
        if lock is None:
            return 0
        batch: _Batch | None = None
        try:
            items = await self._claim(repository.land_batch)
            if not items:
                return 0
            lock = await self.locks.renew(lock, items=[i.id for i in items], ttl_s=self.lock_ttl_s)
            batch = _Batch({i.id: i for i in items}, lock, repository)
            log.info("claimed %d item(s) to land on %s: %s", len(items), lock.target, _tasks(items))
            await self._ask_first(batch)
            if not batch.open_ids():
                return len(items)
            if repository.forge == "github":
                await self._open_pull_requests(batch)
            else:
                await self._land(batch)
            return len(items)
        finally:
            # at the revision its keep-alive renewed it to last: the one it was taken at
            # would no longer match, and the lock would stay until it expired
            with contextlib.suppress(Exception):
                await self.locks.release(batch.lock if batch is not None else lock)

    async def _claim(self, size: int) -> list[WorkItem]:
        claimant = self._claimant()
        items: dict[str, WorkItem] = {}
        while len(items) < size:
            item = await self.svc.work.claim(claimant)
            if item is None:
                break
            if item.status is not WorkStatus.MERGING:  # work someone submitted for "land"
                await self.svc.work.fail(
                    item.id, self.agent_id, "a lander lands handed-in work only", retryable=False
                )
                continue
            again = item.id in items
            self.svc.presence.tasks_changed(claimed=item.id, traceparent=item.traceparent)
            items[item.id] = item  # the newest claim of it holds its current delivery
            if again:
                # Redelivered while it claims (its ack wait passed on a slow host): the batch
                # has waited long enough. Claiming on would meet each held item again every
                # ack wait and, on a host slower than that, never end.
                break
        return list(items.values())

    async def _land(self, batch: _Batch) -> None:
        host = self._host(batch.repository)
        self.last = host
        keeper = asyncio.create_task(self._keep_alive(batch), name="lander-keep-alive")
        try:
            await host.land([candidate_of(i) for i in batch.items.values()], _Steps(self, batch))
        except (LandingError, GitFailed, LockLost) as exc:
            why = str(exc) if not isinstance(exc, GitFailed) else f"git failed: {exc}"
            log.warning("landing stopped: %s", why)
            await self._give_back(batch, f"landing: {why}")
        finally:
            await stop_task(keeper)
            for work_id in batch.items:
                self.svc.presence.tasks_changed(released=work_id)
        if batch.repository.delete_landed and batch.landed:
            try:
                await host.delete_refs(batch.landed)
            except Exception as exc:  # the landing stands; the refs are swept later
                log.warning("the landed branches were not deleted: %s", exc)

    async def _ask_first(self, batch: _Batch) -> None:
        """The coordinator's veto: for each item that needs it (``needs_approval``) the operator
        is asked "land this?" with its diff summary, and the item waits for the answer, out
        of the batch. The repository unreachable: the batch is given back."""
        repo = batch.repository
        asking = [i for i in batch.items.values() if needs_approval(i, repo.veto)]
        if not asking:
            return
        host = self._host(repo)
        entry = self.svc.presence.entry
        handle = entry.handle if entry is not None else ""
        try:
            tip = await host.fetch([candidate_of(i) for i in asking])
            for item in asking:
                summary = await host.summary(tip, candidate_of(item))
                text = approval_question(item, repo.target_branch, summary)
                await self.svc.questions.ask_to_land(self.agent_id, item.id, text, handle=handle)
                del batch.items[item.id]  # the rest of the batch lands without it
                self.svc.presence.tasks_changed(released=item.id)
        except (LandingError, GitFailed) as exc:
            log.warning("asking to land: %s", exc)
            await self._give_back(batch, f"landing: {exc}")
            batch.settled.update(batch.items)

    async def _open_pull_requests(self, batch: _Batch) -> None:
        """Forge mode: a pull request per item (made, or the one already open), and the item
        left waiting for GitHub to merge or close it (Weft watches); GitHub's checks and merge
        queue are the gate. A refusal or an unreachable GitHub gives the rest back."""
        repo = batch.repository
        assert repo.github_repository is not None  # the settings require it with forge github
        github = GitHub(repo.github_api_url, repo.github_repository, self.github_token)
        try:
            for item in batch.items.values():
                ws = item.workstream
                assert ws is not None
                title = candidate_of(item).title
                body = f"{item.description[:4000]}\n\nLoom-Work-Id: {item.id}\nLoom-Branch: {ws.branch}"
                pr = await github.open_pull_request(ws.branch, repo.target_branch, title, body)
                await self.svc.work.await_forge(item.id, self.agent_id, pr.number, pr.url)
                batch.settled.add(item.id)
        except ForgeError as exc:
            log.warning("forge: %s", exc)
            await self._give_back(batch, f"forge: {exc}")
        finally:
            for work_id in batch.items:
                self.svc.presence.tasks_changed(released=work_id)

    async def _give_back(self, batch: _Batch, why: str) -> None:
        """The batch's unsettled items back to the landers' queue untouched, with ``why``; the
        next round waits (see :func:`next_pause`)."""
        self.gave_back = True
        for work_id in batch.open_ids():
            with contextlib.suppress(WorkError):
                await self.svc.work.release_landing(work_id, self.agent_id, why)

    async def _keep_alive(self, batch: _Batch) -> None:
        """While the batch lands: the lock renewed and the claims kept from lapsing."""
        every = min(self.svc.work.ack_wait_s, self.lock_ttl_s) / 3
        while True:
            await tick(every)
            try:
                batch.lock = await self.locks.renew(batch.lock, ttl_s=self.lock_ttl_s)
            except LockLost as exc:
                batch.lost = exc
                return
            except Exception as exc:  # NATS away for a moment: the next round tries again
                raise_if_cancelling()  # nats-py may have turned the landing's end into this
                log.warning("renewing the landing lock: %s", exc)
            for work_id in batch.open_ids():
                try:
                    await self.svc.work.keep_alive(work_id, self.agent_id)
                except Exception:  # the next beat tries again
                    raise_if_cancelling()

    async def run(self, stop: asyncio.Event) -> None:
        """Land until ``stop`` is set; a failed round is logged and tried again, after a
        pause that doubles (up to :data:`BACKOFF_MAX_S`) while rounds keep failing."""
        pause = 0.0
        while not stop.is_set():
            self.gave_back = False
            try:
                handled = await self.run_once()
            except Exception as exc:
                log.warning("a landing round failed: %s", exc)
                handled, self.gave_back = 0, True
            pause = next_pause(pause, poll_s=self.poll_s, handled=handled, gave_back=self.gave_back)
            if pause:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)


class _Steps:
    """What the git steps tell the lander, recorded on the items as it goes."""

    def __init__(self, lander: Lander, batch: _Batch) -> None:
        self.lander = lander
        self.batch = batch

    async def alive(self) -> None:
        if self.batch.lost is not None:
            raise self.batch.lost

    def took(self, step: str, items: list[Candidate], start_ns: int, **attributes: str | int | bool) -> None:
        """A span of each item's trace for a step of its landing (its batch's build, gate, push)."""
        traces = self.lander.svc.traces
        for c in items:
            held = self.batch.items.get(c.work_id)
            with traces.span(
                step,
                work_id=c.work_id,
                traceparent=held.traceparent if held is not None else None,
                start_ns=start_ns,
                attributes={"loom.landing.batch": len(items), **attributes},
            ):
                pass

    async def before_push(self, sha: str, items: list[Candidate]) -> None:
        await self.alive()
        for c in items:
            await self.lander.svc.work.note_pending(c.work_id, self.lander.agent_id, sha)

    async def settled(self, outcome: Settled) -> None:
        work = self.lander.svc.work
        attempt = LandingAttempt(
            lander=self.lander.agent_id,
            outcome=outcome.outcome,
            batch=outcome.batch,
            files=list(outcome.files)[:100],
            detail=outcome.detail,
            gate_s=outcome.gate_s,
            sha=outcome.sha,
            splits=outcome.splits,
        )
        work_id = outcome.candidate.work_id
        log.info(
            "work %s: %s (batch of %d, %d split(s))",
            work_id,
            outcome.outcome,
            outcome.batch,
            outcome.splits,
        )
        if outcome.outcome == "deferred":  # another item of the batch first; not this one's fault
            await work.release_landing(work_id, self.lander.agent_id, outcome.detail, deferred=True)
            self.batch.settled.add(work_id)
            return
        failures = self.batch.repository.land_failures
        await work.settle_landing(work_id, self.lander.agent_id, attempt, max_failures=failures)
        if outcome.outcome == "landed":
            self.batch.landed.append(outcome.candidate)
        self.batch.settled.add(work_id)


# -- the command ----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loom-lander",
        description="Loom's lander: lands approved work on the project's target branch through a "
        "merge queue with a gate (docs/landing.md).",
        epilog="Configuration comes from the environment, as for warp: NATS_URL, LOOM_PROJECT_ID, "
        "LOOM_HANDLE, ... The repository, gate and batch size are the project's (PUT /api/repository).",
    )
    p.add_argument(
        "--poll", type=float, default=POLL_S, help=f"seconds between looks for work (default {POLL_S})"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not 0.05 <= args.poll <= 300:
        print("loom-lander: --poll: must be between 0.05 and 300 seconds", file=sys.stderr)
        return 2
    os.environ.setdefault("LOOM_AGENT_TYPE", AGENT_TYPE)
    from pydantic import ValidationError

    from shared.errors import describe_validation
    from shared.identity import IdentityError, bound_to_credential, load_settings, resolve_identity
    from shared.names import InvalidNameError
    from shared.nats.auth import CredentialsError, agent_credential
    from shared.redact import configure_logging, redact, register_secret
    from shared.settings import NatsSettings, SettingsError
    from warp.settings import load_warp_settings

    try:
        nats_settings = NatsSettings()
        identity_settings = bound_to_credential(load_settings(), agent_credential(nats_settings))
        identity = resolve_identity(identity_settings)
        settings = load_warp_settings().model_copy(
            update={"capabilities": (LAND_CAPABILITY,), "auto_register": True, "checkpoint_s": 0.0}
        )
    except (IdentityError, SettingsError, InvalidNameError, CredentialsError) as exc:
        print(f"loom-lander: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        print(
            "loom-lander: " + redact(describe_validation(exc.errors(include_url=False))),
            file=sys.stderr,
        )
        return 2
    configure_logging(settings.log_level)
    from warp.runtime import WarpRuntime

    rt = WarpRuntime(
        identity,
        settings,
        nats_url=nats_settings.url,
        nats_settings=nats_settings,
        explicit_instance=identity_settings.instance,
    )
    github_token = os.environ.get("LOOM_GITHUB_TOKEN") or None
    register_secret(github_token)
    keep_startup_heap()
    return run_main(_run(rt, identity.project_path, args.poll, settings.landing_lock_s, github_token))


async def _run(
    rt: WarpRuntime, project_path: Path, poll_s: float, lock_s: float, github_token: str | None
) -> int:
    from warp.errors import Unavailable

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    rt.on_exit = stop.set  # a shutdown request (Weft's idle shutdown, an operator) ends it too
    rt.start()
    svc: Services | None = None
    while svc is None and not stop.is_set():
        try:
            svc = await rt.services()
        except Unavailable as exc:
            log.warning("%s", exc)
    if svc is not None:
        log.info("lander %s ready in project %s", svc.agent_id, svc.names.project_id)
        await Lander(svc, project_path, poll_s=poll_s, lock_ttl_s=lock_s, github_token=github_token).run(stop)
    await rt.stop("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
