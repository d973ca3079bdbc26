// Keyboard-first judging: 0-3 grade the item on screen and htmx swaps in the next one.
// The time spent is measured here, from the moment an item is shown to the key press.
(function () {
  "use strict";
  let shownAt = performance.now();

  function panel() { return document.getElementById("judge-panel"); }

  function grade(key) {
    const p = panel();
    if (!p || !p.dataset.item) return;
    const button = p.querySelector('button.grade[data-key="' + key + '"]');
    if (!button || button.disabled) return;
    const seconds = p.querySelector('input[name="seconds"]');
    if (seconds) seconds.value = ((performance.now() - shownAt) / 1000).toFixed(3);
    button.classList.add("pressed");
    // A fast judge can press the next key before htmx has wired up freshly swapped-in content;
    // processing is idempotent, and without it the click would be a full-page form post.
    if (window.htmx) window.htmx.process(button.form);
    button.click();
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    const tag = (event.target && event.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
    if (/^[0-3]$/.test(event.key)) {
      event.preventDefault();
      grade(event.key);
    }
  });

  // Mouse users: fill in the time as well before the form is sent.
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("button.grade");
    if (!button) return;
    const seconds = panel() && panel().querySelector('input[name="seconds"]');
    if (seconds && seconds.value === "0") {
      seconds.value = ((performance.now() - shownAt) / 1000).toFixed(3);
    }
  }, true);

  document.addEventListener("htmx:afterSwap", function () {
    shownAt = performance.now();
    window.scrollTo(0, 0);
  });
})();
