// The Content-Security-Policy allows no inline style and no eval: htmx must neither add its own
// indicator styles nor evaluate attributes as code. Set here, before htmx starts (deferred
// scripts run before DOMContentLoaded), rather than in a <meta name="htmx-config">: htmx reads
// only the first such tag, and a page may need its own (the judging page does).
(function () {
  "use strict";
  if (!window.htmx) return;
  window.htmx.config.includeIndicatorStyles = false;
  window.htmx.config.allowEval = false;
})();
