// The one client side of live updates, for every page that listens (chat, documents, inbox).
// A page opens its websocket with htmx's ws extension (hx-ext="ws" ws-connect="…"); the server sends
// HTML fragments carrying hx-swap-oob, which htmx swaps in (and hx-swap-oob="delete" removes). This
// file only adds what htmx lacks:
// - upsert: a fragment whose target is not on the page yet names a container in data-live-into
//   (data-live-at="afterbegin" to go first, else last) and is inserted there instead of dropped:
//   the "live" extension (hx-ext="live" on <body>, so every request and socket) puts an empty
//   element of its id there before htmx swaps, which htmx then swaps like any other; a fragment
//   with neither its target nor its container on this page is not for it and is left out, as is
//   a removal (hx-swap-oob="delete") of what the page does not show, and an update marked
//   data-live-if-shown of something the page does not show (a site's card on a list rendered before
//   the site was added); htmx would report each as an error;
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

  // The response's fragments that name a container: each gets its place on the page, or is left
  // out; a removal or an if-shown update of what the page does not show is left out too.
  function makeRoom(text) {
    if (typeof text !== "string" || !/data-live-into|data-live-if-shown|hx-swap-oob="delete"/.test(text)) return text;
    const parsed = document.createElement("template");
    parsed.innerHTML = text;
    // Table rows come wrapped in <template> (HTML parses a <tr> only among table parts): look inside.
    const all = (selector, root = parsed.content) => [
      ...root.querySelectorAll(selector),
      ...[...root.querySelectorAll("template")].flatMap((t) => all(selector, t.content)),
    ];
    let dropped = false;
    all('[hx-swap-oob="delete"][id], [data-live-if-shown][id]').forEach((el) => {
      if (!document.getElementById(el.id)) {
        el.remove();
        dropped = true;
      }
    });
    all("[data-live-into][id]").forEach((el) => {
      if (document.getElementById(el.id)) return;
      const into = document.querySelector(el.dataset.liveInto);
      if (!into) {
        el.remove();
        dropped = true;
        return;
      }
      const room = document.createElement(el.tagName);
      room.id = el.id;
      room.className = el.className; // htmx settles the class from the element it replaces
      into.insertAdjacentElement(el.dataset.liveAt || "beforeend", room);
    });
    return dropped ? parsed.innerHTML : text;
  }

  if (window.htmx) {
    window.htmx.defineExtension("live", { transformResponse: (text) => makeRoom(text) });
  }

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
