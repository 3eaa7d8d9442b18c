// htmx swaps only successful responses: a refused or failed request would change nothing on the page
// and say nothing. Two cases:
// - A refusal the server shaped for the page names where its sentence goes (HX-Retarget, e.g.
//   "#flash", the message area of _base.html; ragchat.views.csrf_failure for a page whose form
//   expired): htmx is let to swap it in there.
// - Any other failure (a 404: deleted in another tab; a 500; the server out of reach) gets a short
//   sentence of its own in the message area, as an alert, in place of the previous one of its kind.
//   The websocket (the chat's questions and answers) is not an htmx request: none of this touches it.
(function () {
  "use strict";

  const SAID = {
    gone: "That is no longer there: it was deleted, perhaps in another tab, or is not available to you.",
    refused: "That could not be done.",
    failed: "Something went wrong on the server. Try again in a moment; if it keeps happening, tell your administrator.",
    unreachable: "The server could not be reached. Check your connection and try again.",
  };
  const RELOAD = { gone: "to see what is there now.", refused: "and try again." };

  function say(kind) {
    const flash = document.getElementById("flash");
    if (!flash) return;
    const p = document.createElement("p");
    p.className = "flash-error";
    p.setAttribute("role", "alert");
    p.dataset.failure = kind;
    p.append(SAID[kind]);
    if (RELOAD[kind]) {
      const reload = document.createElement("a");
      reload.href = window.location.pathname + window.location.search;
      reload.textContent = "Reload the page";
      p.append(" ", reload, " " + RELOAD[kind]);
    }
    flash.querySelectorAll("[data-failure]").forEach((old) => old.remove());
    flash.append(p);
    reveal(flash);
  }

  // The message area is at the top of the page, under the sticky top bar: scrolled away, it comes back.
  function reveal(flash) {
    const bar = document.querySelector(".topbar");
    const covered = bar ? bar.getBoundingClientRect().bottom : 0;
    if (flash.getBoundingClientRect().top < covered) window.scrollTo({ top: 0 });
  }

  // A refusal is an answer the page expects (its form expired, what it acts on was deleted in
  // another tab), told to the person: htmx is told it is not an error (it would log one). A failure of
  // the server (5xx) or of the network stays one.
  document.body.addEventListener("htmx:beforeSwap", (e) => {
    const xhr = e.detail.xhr;
    if (xhr.status < 400 || xhr.status >= 500) return;
    e.detail.isError = false;
    if (xhr.getResponseHeader("HX-Retarget")) e.detail.shouldSwap = true; // the server said it, where it belongs
    else say(xhr.status === 404 ? "gone" : "refused");
  });

  document.body.addEventListener("htmx:afterSwap", (e) => {
    if (e.detail.target && e.detail.target.id === "flash") reveal(e.detail.target);
  });

  document.body.addEventListener("htmx:responseError", () => say("failed")); // a 5xx: refusals are said above

  document.body.addEventListener("htmx:sendError", () => say("unreachable"));

  // A new action makes the last one's failure old news (the server's own messages stay).
  document.body.addEventListener("htmx:beforeRequest", () => {
    document.querySelectorAll("#flash [data-failure]").forEach((old) => old.remove());
  });
})();
