// Keyboard-first judging. 0-3 grade the item on screen and htmx swaps in the next one;
// u (unsure) and s (skip) open a one-line note that Enter sends; z undoes the last answer;
// ? shows the keys; / searches the protocol; r sends again an answer the server did not get.
// Keys are ignored while typing in a field.
// The time spent is measured here, from the moment an item is shown to the answer.
(function () {
  "use strict";
  let shownAt = performance.now();

  function panel() { return document.getElementById("judge-panel"); }
  function hasItem() { const p = panel(); return Boolean(p && p.dataset.item); }

  function elapsed() { return ((performance.now() - shownAt) / 1000).toFixed(3); }

  function press(button) {
    if (!button || button.disabled) return;
    button.classList.add("pressed");
    // A fast judge can press the next key before htmx has wired up freshly swapped-in content;
    // processing is idempotent, and without it the click would be a full-page form post.
    if (window.htmx) window.htmx.process(button.form);
    button.click();
  }

  function grade(key) {
    if (!hasItem()) return;
    press(panel().querySelector('button.grade[data-key="' + key + '"]'));
  }

  const NOTE_LABELS = {
    unsure: "What makes you unsure? (optional, Enter sends)",
    skip: "Why skip this item? (required: a broken document, another language…)",
  };

  function openNote(kind) {
    if (!hasItem()) return;
    const form = panel().querySelector("#note-form");
    if (!form) return;
    form.hidden = false;
    form.dataset.kind = kind;
    form.querySelector('input[name="kind"]').value = kind;
    form.querySelector("#note-label").textContent = NOTE_LABELS[kind];
    const input = form.querySelector("#note-input");
    input.required = kind === "skip";
    if (window.htmx) window.htmx.process(form);
    input.focus();
  }

  function closeNote() {
    const form = panel() && panel().querySelector("#note-form");
    if (!form) return;
    form.hidden = true;
    const input = form.querySelector("#note-input");
    input.value = ""; // cancelled: a skip reason must not come back as an unsure note
    input.blur();
    focusPanel();
  }

  function undo() {
    const form = document.getElementById("undo-form");
    if (form) press(form.querySelector("button"));
  }

  function toggleHelp(show) {
    const help = document.getElementById("help");
    if (help) help.hidden = show === undefined ? !help.hidden : !show;
  }

  function isTyping(target) {
    const tag = (target && target.tagName) || "";
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || Boolean(target && target.isContentEditable);
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (isTyping(event.target)) {
      if (event.key === "Escape") {
        event.preventDefault();
        if (event.target.id === "note-input") closeNote();
        else if (event.target.id === "protocol-search") clearSearch(event.target);
        else event.target.blur();
      }
      return; // Enter in the note field submits the note form by itself
    }
    if (event.repeat) return;
    const help = document.getElementById("help");
    if (help && !help.hidden) {
      // The help covers the item: no key grades what the annotator cannot see.
      if (event.key === "Escape" || event.key === "?") {
        event.preventDefault();
        toggleHelp(false);
      }
      return;
    }
    const actions = {
      u: () => openNote("unsure"),
      s: () => openNote("skip"),
      z: undo,
      r: () => { const box = document.getElementById("judge-status"); if (box && !box.hidden) resend(); },
      "?": () => toggleHelp(),
      Escape: () => toggleHelp(false),
      "/": () => { const s = document.getElementById("protocol-search"); if (s) s.focus(); },
    };
    if (/^[0-3]$/.test(event.key)) {
      event.preventDefault();
      grade(event.key);
    } else if (Object.prototype.hasOwnProperty.call(actions, event.key)) {
      event.preventDefault();
      actions[event.key]();
    }
  });

  // Buttons for mouse users, wired the same way as the keys.
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("[data-action]");
    if (!button) return;
    const action = button.dataset.action;
    if (action === "unsure" || action === "skip") openNote(action);
    else if (action === "close-note") closeNote();
    else if (action === "help") toggleHelp();
    else if (action === "retry") resend();
  });

  // Every answer carries the seconds spent on the item (capture: before htmx reads the form).
  document.addEventListener("submit", function (event) {
    const seconds = event.target.querySelector && event.target.querySelector('input[name="seconds"]');
    if (seconds) seconds.value = elapsed();
    if (!retrying) sent = { form: event.target, button: event.submitter || null };
  }, true);

  // --- an answer the server did not receive ---------------------------------------------
  // A network error, a 5xx or a dropped database connection leaves the item on screen with
  // its form, whose hidden `key` is the answer's idempotency key. The very same request (same
  // form, same button, so the same key and grade) is sent again a few times, waiting longer
  // each time, and on "Retry" (or r): the server stores one answer per key, so a retry of an
  // answer that did arrive stores nothing twice, and the annotator never grades again.
  const RETRY_DELAYS = [1000, 2000, 4000, 8000]; // then only by hand
  let sent = null; // { form, button } of the last request made from the panel
  let failures = 0;
  let timer = null;
  let retrying = false;

  function status(text) {
    const box = document.getElementById("judge-status");
    if (!box) return;
    box.hidden = !text;
    document.getElementById("judge-status-text").textContent = text || "";
  }

  function stopRetrying() {
    if (timer) clearTimeout(timer);
    timer = null;
  }

  function resend() {
    stopRetrying();
    if (!sent || !document.body.contains(sent.form)) return;
    retrying = true;
    try {
      if (window.htmx) window.htmx.process(sent.form);
      if (sent.button && !sent.button.disabled) sent.button.click();
      else sent.form.requestSubmit();
    } finally {
      retrying = false;
    }
  }

  function failed(event, why) {
    const elt = event.detail && event.detail.elt;
    const form = elt && elt.closest ? elt.closest("form") : null;
    if (!form || !form.closest("#judge-panel")) return;
    if (!sent || sent.form !== form) sent = { form: form, button: null }; // e.g. the claim on load
    stopRetrying();
    const xhr = event.detail.xhr;
    const code = xhr ? xhr.status : 0;
    if (code && code < 500 && code !== 408 && code !== 429) {
      // Not a fault that waiting mends (signed out, a stale page): say so, retry by hand only.
      status("The server refused this (" + code + "). Reload the page; your saved answers are kept.");
      return;
    }
    failures += 1;
    const delay = RETRY_DELAYS[failures - 1];
    const kept = "Not saved yet (" + why + "). Your answer is kept and will be sent again";
    if (delay === undefined) {
      status(kept.replace(" and will be sent again", "") + ": press Retry when the connection is back.");
    } else {
      status(kept + " in " + delay / 1000 + " s (attempt " + (failures + 1) + "). Do not grade again.");
      timer = setTimeout(resend, delay);
    }
    const retry = document.getElementById("retry-button");
    if (retry) retry.focus({ preventScroll: true });
  }

  document.addEventListener("htmx:sendError", function (event) { failed(event, "no connection to the server"); });
  document.addEventListener("htmx:timeout", function (event) { failed(event, "the server took too long"); });
  document.addEventListener("htmx:responseError", function (event) {
    const xhr = event.detail.xhr;
    failed(event, "the server answered " + (xhr ? xhr.status : "with an error"));
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    if (!event.detail.target || event.detail.target.id !== "judge-panel") return;
    failures = 0;
    stopRetrying();
    const onRetry = document.activeElement && document.activeElement.id === "retry-button";
    status("");
    if (onRetry) { document.activeElement.blur(); focusPanel(); } // back to the document
  });

  // After a swap the focused button is gone and focus falls back to <body>: put it where the
  // keyboard is needed next, the acknowledge button or the document (so that the arrow keys,
  // Page Down and Space scroll a long document), unless it is somewhere else on purpose.
  function focusPanel() {
    const active = document.activeElement;
    const p = panel();
    if (!p || (active && active !== document.body && !p.contains(active))) return;
    const target = p.querySelector("#ack-button") || p.querySelector("#claim-button") || p.querySelector("#doc-text");
    if (target) target.focus({ preventScroll: true });
  }

  document.addEventListener("htmx:afterSwap", function () {
    shownAt = performance.now();
    window.scrollTo(0, 0);
    focusPanel();
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", focusPanel);
  else focusPanel();

  // The protocol search filters grades, anchors, edge cases and the full text as you type.
  // A section without a match is hidden with its heading, so "No match." stands alone.
  function filterProtocol(value) {
    const needle = value.trim().toLowerCase();
    const entries = document.querySelectorAll("#protocol .protocol-block li, #protocol .protocol-block p");
    let hits = 0;
    entries.forEach(function (entry) {
      const match = !needle || entry.textContent.toLowerCase().includes(needle);
      entry.hidden = !match;
      if (match) hits += 1;
    });
    document.querySelectorAll("#protocol .protocol-block").forEach(function (block) {
      const shown = !needle || Boolean(block.querySelector("li:not([hidden]), p:not([hidden])"));
      block.hidden = !shown;
      if (block.tagName === "DETAILS") block.open = Boolean(needle) && shown;
      const heading = block.previousElementSibling;
      if (heading && heading.tagName === "H3") heading.hidden = !shown;
    });
    const counter = document.getElementById("protocol-hits");
    if (counter) {
      counter.hidden = !needle;
      counter.textContent = hits ? hits + " matching" : "No match.";
    }
  }

  // Escape leaves the search empty and the whole protocol shown, then goes back to judging.
  function clearSearch(input) {
    input.value = "";
    filterProtocol("");
    input.blur();
    focusPanel();
  }

  document.addEventListener("input", function (event) {
    if (event.target.id === "protocol-search") filterProtocol(event.target.value);
  });
})();
