"""What the browser tests read off the judging panel, and a key press that waits for htmx."""

from __future__ import annotations


def shown(page) -> str:
    """The id of the item on screen, once the panel has claimed a query if it had to (opening
    the page claims nothing: its panel posts the claim as soon as it loads)."""
    page.wait_for_function("() => !document.getElementById('claim-form')")
    return page.locator("#judge-panel").get_attribute("data-item") or ""


def press_and_wait(page, key: str) -> None:
    """Press a key and wait until htmx has swapped in a different item."""
    before = shown(page)
    page.keyboard.press(key)
    page.wait_for_function(
        "b => (document.getElementById('judge-panel').dataset.item || '') !== b", arg=before
    )
