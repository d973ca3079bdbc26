// The adjudication page, keyboard first like the judging page: 0-3 save that final grade (the
// ruling typed so far goes with it) and the next disagreement opens. Keys are ignored while
// typing; Esc leaves the ruling field, so that the next key is a grade.
(function () {
  "use strict";
  function isTyping(target) {
    const tag = (target && target.tagName) || "";
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || Boolean(target && target.isContentEditable);
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    if (isTyping(event.target)) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    if (!/^[0-3]$/.test(event.key)) return;
    const button = document.querySelector('#adjudicate-form button.grade[data-key="' + event.key + '"]');
    if (!button || button.disabled) return;
    event.preventDefault();
    button.classList.add("pressed");
    button.click();
  });

  // One answer per page: a second key press while the first is on its way sends nothing.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form.id !== "adjudicate-form") return;
    if (form.dataset.sent) event.preventDefault();
    form.dataset.sent = "1";
  });
})();
