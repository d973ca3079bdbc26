// Actions that cannot be taken back ask first: a form or submit button with data-confirm shows
// its text in a confirmation dialog, and nothing is sent unless the user agrees.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    const source = (event.submitter && event.submitter.closest("[data-confirm]")) || event.target.closest("[data-confirm]");
    if (source && !window.confirm(source.dataset.confirm)) event.preventDefault();
  });
})();
