// The one client side of live updates, for every page that listens (chat, documents, inbox).
// A page opens its websocket with htmx's ws extension (hx-ext="ws" ws-connect="…"); the server sends
// HTML fragments carrying hx-swap-oob, which htmx swaps in (and hx-swap-oob="delete" removes). This
// file only adds what htmx lacks:
// - upsert: a fragment whose target is not on the page yet names a container in data-live-into
//   (data-live-at="afterbegin" to go first, else last) and is inserted there instead of dropped;
// - move: with data-live-move an existing target is removed and the fragment inserted as if new;
// - connection state: every .conn inside the socket's element shows connecting / open / closed
//   (its text from data-connecting / data-open / data-closed, else the defaults below).
(function () {
  "use strict";

  function insert(el) {
    const into = document.querySelector(el.dataset.liveInto);
    if (!into) return;
    into.insertAdjacentElement(el.dataset.liveAt || "beforeend", el);
    if (window.htmx) window.htmx.process(el);
  }

  document.body.addEventListener("htmx:oobErrorNoTarget", (e) => {
    const el = e.detail && e.detail.content;
    if (el && el.dataset && el.dataset.liveInto) insert(el);
  });

  document.body.addEventListener("htmx:oobBeforeSwap", (e) => {
    const el = e.detail.fragment && e.detail.fragment.firstElementChild;
    if (!el || !el.dataset || el.dataset.liveMove === undefined || !el.dataset.liveInto) return;
    e.detail.shouldSwap = false;
    e.detail.target.remove();
    insert(el);
  });

  const TEXT = { connecting: "Connecting…", open: "Connected", closed: "Reconnecting…" };
  const STATE = { "htmx:wsConnecting": "connecting", "htmx:wsOpen": "open", "htmx:wsClose": "closed" };
  Object.keys(STATE).forEach((name) => {
    document.body.addEventListener(name, (e) => {
      const state = STATE[name];
      e.target.querySelectorAll(".conn").forEach((conn) => {
        conn.dataset.state = state;
        const text = conn.querySelector(".conn-text");
        if (text) text.textContent = conn.dataset[state] || TEXT[state];
      });
    });
  });
})();
