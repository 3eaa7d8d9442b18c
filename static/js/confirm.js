// The one confirmation pattern: an element with data-confirm="Question?" asks before it acts.
// A plain form asks on submit; an htmx element (hx-post, hx-delete…) asks before its request.
(function () {
  "use strict";

  document.addEventListener("submit", (e) => {
    const form = e.target;
    const question = form.dataset && form.dataset.confirm;
    const htmxDriven = ["hx-post", "hx-put", "hx-patch", "hx-delete", "hx-get"].some((a) => form.hasAttribute(a));
    if (question && !htmxDriven && !window.confirm(question)) e.preventDefault();
  });

  document.body.addEventListener("htmx:confirm", (e) => {
    const question = e.detail.elt.dataset && e.detail.elt.dataset.confirm;
    if (!question) return;
    e.preventDefault();
    if (window.confirm(question)) e.detail.issueRequest(true);
  });
})();
