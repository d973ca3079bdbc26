// A file sent by htmx from a form marked data-upload shows how much of it has gone: the form's
// <progress class="upload-progress"> follows htmx's upload progress events. The server answers
// with HX-Redirect, and the page it names shows the import's own progress. Without JavaScript
// the form posts as an ordinary form.
(function () {
  "use strict";

  function uploadForm(event) {
    const target = event.target;
    return target && target.closest ? target.closest("form[data-upload]") : null;
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    const form = uploadForm(event);
    if (!form) return;
    form.querySelectorAll("button").forEach(function (button) { button.disabled = true; });
    const bar = form.querySelector(".upload-progress");
    if (bar) { bar.hidden = false; bar.value = 0; }
  });

  document.addEventListener("htmx:xhr:progress", function (event) {
    const form = uploadForm(event);
    if (!form || !event.detail.lengthComputable || !event.detail.total) return;
    const percent = Math.round((100 * event.detail.loaded) / event.detail.total);
    const bar = form.querySelector(".upload-progress");
    const label = form.querySelector(".upload-status");
    if (bar) bar.value = percent;
    if (label) label.textContent = "Sending the file: " + percent + " %";
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    const form = uploadForm(event);
    if (!form || event.detail.successful) return;
    form.querySelectorAll("button").forEach(function (button) { button.disabled = false; });
    const label = form.querySelector(".upload-status");
    if (label) label.textContent = "The upload did not reach the server; try again.";
  });
})();
