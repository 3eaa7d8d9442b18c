// htmx swaps only successful responses: a refused request would change nothing on the page and say
// nothing. A refusal the server shaped for the page names where its sentence goes (HX-Retarget, e.g.
// "#flash", the message area of _base.html; ragchat.views.csrf_failure for a page whose form
// expired); this lets htmx swap it in there. Any other refusal keeps htmx's default.
(function () {
  "use strict";

  document.body.addEventListener("htmx:beforeSwap", (e) => {
    const xhr = e.detail.xhr;
    if (xhr.status >= 400 && xhr.getResponseHeader("HX-Retarget")) e.detail.shouldSwap = true;
  });
})();
