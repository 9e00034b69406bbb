"""``patch`` (``dom.js``), which every live region draws through: nodes drawn the same are kept
(a press spanning a redraw lands on the button it began on), controls drawn differently are
replaced whole, and the result is what drawing anew would give. Run in the page itself, on
the module the console serves."""

from __future__ import annotations

from typing import Any

import pytest
from console_helpers import ConsoleWeft, Tab, register, sign_in
from nats.aio.client import Client as NatsClient
from playwright.async_api import expect

from shared.leases.book import LeaseBook
from shared.names import ProjectNames

pytestmark = pytest.mark.timeout(60)

# Draws a table body twice through patch and reports what was kept; ``first`` and ``second``
# are lists of [id, text, button label] rows.
DRAW_TWICE = """async ({ first, second }) => {
  const { h, patch, replace } = await import("/console/dom.js");
  const row = ([id, text, label]) => h("tr", { dataset: { id } },
    h("td", { class: "text" }, text),
    h("td", null, h("button", { type: "button", onclick: () => (window.pressed = `${id}:${label}`) },
      label)));
  const body = h("tbody");
  patch(body, first.map(row));
  const before = new Map([...body.children].map((tr) => [tr.dataset.id, tr]));
  const buttons = new Map([...body.children].map((tr) => [tr.dataset.id, tr.querySelector("button")]));
  const cells = new Map([...body.children].map((tr) => [tr.dataset.id, tr.querySelector(".text")]));
  patch(body, second.map(row));
  const anew = h("tbody");
  replace(anew, second.map(row));
  const kept = {};
  for (const tr of body.children) {
    const id = tr.dataset.id;
    kept[id] = { row: before.get(id) === tr, cell: cells.get(id) === tr.querySelector(".text"),
      button: buttons.get(id) === tr.querySelector("button") };
  }
  window.pressed = null;
  for (const button of body.querySelectorAll("button")) button.click();
  return { html: body.innerHTML, anew: anew.innerHTML, order: [...body.children].map((tr) => tr.dataset.id),
    kept, lastPressed: window.pressed };
}"""


async def draw_twice(tab: Tab, first: list[list[str]], second: list[list[str]]) -> dict[str, Any]:
    result: dict[str, Any] = await tab.page.evaluate(DRAW_TWICE, {"first": first, "second": second})
    assert result["html"] == result["anew"]  # the same page as drawing anew
    return result


async def test_patch_keeps_what_is_drawn_the_same_and_replaces_changed_controls(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    await sign_in(tab.page, console_weft.console(project))
    # a clock moved on: the rows, their cells and buttons stay, the text is the new one
    moved = await draw_twice(
        tab,
        [["a", "5 s ago", "Discard"], ["b", "just now", "Discard"]],
        [["a", "10 s ago", "Discard"], ["b", "5 s ago", "Discard"]],
    )
    assert moved["kept"] == {k: {"row": True, "cell": True, "button": True} for k in ("a", "b")}
    # a button drawn differently is a new button, whose listener is the new one
    relabelled = await draw_twice(tab, [["a", "x", "Discard"]], [["a", "x", "Retry"]])
    assert relabelled["kept"]["a"] == {"row": True, "cell": True, "button": False}
    assert relabelled["lastPressed"] == "a:Retry"
    # rows in a new order, one gone and one new: each kept row moves with its button
    shuffled = await draw_twice(
        tab,
        [["a", "1", "Go"], ["b", "2", "Go"], ["c", "3", "Go"]],
        [["c", "3", "Go"], ["d", "4", "Go"], ["a", "1", "Go"]],
    )
    assert shuffled["order"] == ["c", "d", "a"]
    assert shuffled["kept"]["c"]["button"] and shuffled["kept"]["a"]["button"]
    assert shuffled["kept"]["d"] == {"row": False, "cell": False, "button": False}


async def test_patch_leaves_what_a_person_typed_in_a_field_drawn_the_same(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    await sign_in(tab.page, console_weft.console(project))
    typed = await tab.page.evaluate(
        """async () => {
      const { h, patch } = await import("/console/dom.js");
      const form = (clock) => [h("p", null, clock), h("textarea", { id: "t", rows: 2 })];
      const box = h("div");
      patch(box, form("just now"));
      box.querySelector("textarea").value = "half an answer";
      patch(box, form("5 s ago"));
      return [box.querySelector("p").textContent, box.querySelector("textarea").value];
    }"""
    )
    assert typed == ["5 s ago", "half an answer"]


async def test_patch_leaves_no_listener_on_an_element_drawn_differently(
    console_weft: ConsoleWeft, tab: Tab, project: str
) -> None:
    """An element that is not a control but was given a listener is replaced whole when it is
    drawn differently, whether the new one has a listener or not: the old listener acted on
    what the old element was drawn from."""
    await sign_in(tab.page, console_weft.console(project))
    kept = await tab.page.evaluate(
        """async () => {
      const { h, patch } = await import("/console/dom.js");
      const box = h("div");
      window.pressed = null;
      patch(box, h("span", { onclick: () => (window.pressed = "old") }, "one"));
      const first = box.firstChild;
      patch(box, h("span", null, "two"));  // no listener now, and other text
      box.firstChild.click();
      return { same: box.firstChild === first, pressed: window.pressed, text: box.textContent };
    }"""
    )
    assert kept == {"same": False, "pressed": None, "text": "two"}


async def test_a_lease_keeps_its_end_button_while_its_clock_moves_on(
    console_weft: ConsoleWeft, tab: Tab, project: str, nc: NatsClient
) -> None:
    """The leases view draws again every 5 s ("in 45 s"); drawn anew, the End lease button was
    replaced each time, and a press spanning the redraw was lost."""
    page = tab.page
    book = LeaseBook(nc, ProjectNames(project))
    await book.start()
    try:
        coder = await register(nc, project, "coder", "generic")  # a holder offline loses its leases
        # under a minute, so the clock says seconds and moves on every 5 s
        held = await book.acquire(coder.agent_id, ["src/"], reason="r", handle="coder", ttl_s=50)
        await sign_in(page, console_weft.console(project, "leases"))
        row = page.locator(f'#lease-list tr[data-lease-id="{held.id}"]')
        clock = row.locator("time")
        shown = await clock.text_content()
        end = await row.get_by_role("button", name="End lease").element_handle()
        await expect(clock).not_to_have_text(shown or "", timeout=20_000)  # the clock moved on
        assert await end.evaluate("button => button.isConnected")  # the same button, not a copy
        await end.click()
        await expect(row.get_by_role("button", name="Confirm end lease")).to_be_focused()
    finally:
        await book.stop()


async def test_the_fleet_filter_keeps_its_options_while_the_fleet_is_drawn_again(
    console_weft: ConsoleWeft, tab: Tab, project: str, nc: NatsClient
) -> None:
    """The fleet view fills its Type filter on every update; options made anew closed a list
    a person had open. Options listed the same are kept, and so is what was picked."""
    page = tab.page
    await register(nc, project, "coder", "claude-code")
    await register(nc, project, "helper", "generic")
    await sign_in(page, console_weft.console(project, "fleet"))
    choice = page.locator("#fleet-type")
    await expect(choice.locator("option")).to_have_count(3)  # any, claude-code, generic
    await choice.select_option("generic")
    await expect(page.locator("#agents tbody tr")).to_have_count(1)
    option = await choice.locator('option[value="generic"]').element_handle()
    clock = page.locator("#agents tbody tr time")
    shown = await clock.text_content()
    await expect(clock).not_to_have_text(shown or "", timeout=20_000)  # drawn again since
    assert await option.evaluate("option => option.isConnected")  # the same option, not a copy
    await expect(choice).to_have_value("generic")
