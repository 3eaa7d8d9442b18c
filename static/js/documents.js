// Live document rows: the server pushes {id, html} over a websocket whenever a row changes
// (queued -> processing n% -> ready/failed, or deleted). The html was rendered and escaped by Django.
(function () {
  "use strict";
  var rows = document.getElementById("document-rows");
  if (!rows) return;
  var state = document.getElementById("ws-state");
  var count = document.getElementById("document-count");

  function recount() {
    if (!count) return;
    var n = rows.querySelectorAll("tr").length;
    count.textContent = n + " document" + (n === 1 ? "" : "s");
  }
  var retry = 1000;

  function fragment(html) {
    var template = document.createElement("template");
    template.innerHTML = "<table><tbody>" + html + "</tbody></table>";
    return template.content.querySelector("tr");
  }

  function apply(message) {
    if (!message || !message.id) return;
    var current = document.getElementById(message.id);
    if (!message.html) {
      if (current) current.remove();
      recount();
      return;
    }
    var row = fragment(message.html);
    if (!row) return;
    if (current) current.replaceWith(row);
    else rows.insertBefore(row, rows.firstChild);
    var empty = document.getElementById("no-documents");
    if (empty) empty.remove();
    if (window.htmx) window.htmx.process(row);
    recount();
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + "/ws/documents/");
    socket.onopen = function () { retry = 1000; if (state) state.textContent = "live"; document.body.dataset.docsLive = "1"; };
    socket.onmessage = function (event) {
      try { apply(JSON.parse(event.data)); } catch (e) { /* ignore a malformed frame */ }
    };
    socket.onclose = function () {
      if (state) state.textContent = "reconnecting…";
      delete document.body.dataset.docsLive;
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 15000);
    };
  }
  // Rows of a finished upload: insert those the live feed has not delivered yet (it may be first).
  document.body.addEventListener("htmx:afterSwap", function () {
    var templates = document.querySelectorAll("#upload-result template.new-rows");
    templates.forEach(function (template) {
      var fresh = Array.prototype.slice.call(template.content.querySelectorAll("tr")).reverse();
      fresh.forEach(function (row) {
        if (document.getElementById(row.id)) return;
        var copy = document.importNode(row, true);
        rows.insertBefore(copy, rows.firstChild);
        if (window.htmx) window.htmx.process(copy);
      });
      template.remove();
      recount();
      var empty = document.getElementById("no-documents");
      if (empty) empty.remove();
    });
    var form = document.getElementById("upload-form");
    if (form && document.querySelector("#upload-result .upload-ok")) form.reset();
  });
  connect();
})();
