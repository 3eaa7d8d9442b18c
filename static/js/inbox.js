// The owner's inbox, live: new questions arrive at the top, answered ones leave (ws/inbox/).
(function () {
  "use strict";
  const page = document.querySelector("[data-ws]");
  if (!page) return;
  const list = document.getElementById("inbox-list");
  const empty = document.getElementById("inbox-empty");
  const count = document.getElementById("inbox-open-count");
  const conn = document.getElementById("inbox-conn");
  let delay = 500;

  function setState(state, text) {
    if (!conn) return;
    conn.dataset.state = state;
    conn.querySelector(".conn-text").textContent = text;
  }

  function setCount(n) {
    if (count) count.textContent = n;
    let nav = document.getElementById("nav-inbox-count");
    const link = document.querySelector('nav.topnav a[href$="/routing/inbox/"]');
    if (!nav && link && n > 0) {
      nav = document.createElement("span");
      nav.id = "nav-inbox-count";
      nav.className = "badge-count badge-inbox";
      link.append(nav);
    }
    if (nav) { nav.textContent = n; nav.hidden = n === 0; }
    if (empty) empty.hidden = list.children.length > 0;
  }

  function apply(frame) {
    const old = document.getElementById(frame.id);
    if (old) old.remove();
    if (frame.op === "upsert" && frame.html) {
      const holder = document.createElement("template");
      holder.innerHTML = frame.html.trim();
      const row = holder.content.firstElementChild;
      row.classList.add("is-new");
      list.prepend(row);
      setTimeout(() => row.classList.remove("is-new"), 2500);
    }
    setCount(frame.open);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + page.dataset.ws);
    ws.onopen = () => { delay = 500; setState("open", "Live"); };
    ws.onmessage = (e) => { try { apply(JSON.parse(e.data)); } catch (err) { console.error(err); } };
    ws.onclose = () => {
      setState("closed", "Reconnecting…");
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    };
  }
  connect();
})();
