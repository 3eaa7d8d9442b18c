// The one confirmation pattern: an element with data-confirm="Question?" asks before it acts.
// A plain form asks on submit, when the form or the button that submits it carries the question;
// an htmx element (hx-post, hx-delete…: a link, a button, a form, or a button of an htmx form) asks
// before its request. Without script the element leads to a page that asks instead (_confirm.html).
(function () {
  "use strict";

  const HTMX = ["hx-post", "hx-put", "hx-patch", "hx-delete", "hx-get"];

  function question(...elements) {
    const asker = elements.find((el) => el && el.dataset && el.dataset.confirm);
    return asker ? asker.dataset.confirm : "";
  }

  document.addEventListener("submit", (e) => {
    const form = e.target;
    const asked = question(e.submitter, form);
    const htmxDriven = HTMX.some((a) => form.hasAttribute(a));
    if (asked && !htmxDriven && !window.confirm(asked)) e.preventDefault();
  });

  document.body.addEventListener("htmx:confirm", (e) => {
    const trigger = e.detail.triggeringEvent;
    const asked = question(e.detail.elt, trigger && trigger.submitter);
    if (!asked) return;
    e.preventDefault();
    if (window.confirm(asked)) e.detail.issueRequest(true);
  });
})();
