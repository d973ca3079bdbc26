// The protocol draft form: "Add a row" copies an empty row of the same table.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("[data-add-row]");
    if (!button) return;
    const body = document.querySelector('table[data-rows="' + button.dataset.addRow + '"] tbody');
    const last = body && body.lastElementChild;
    if (!last) return;
    const row = last.cloneNode(true);
    row.querySelectorAll("input, textarea").forEach(function (field) { field.value = ""; });
    row.querySelectorAll("small").forEach(function (note) { note.remove(); });
    body.appendChild(row);
    const first = row.querySelector("input, textarea");
    if (first) first.focus();
  });
})();
