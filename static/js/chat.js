// Chat page behaviour that HTML and CSS cannot do alone: Enter to send, clearing the composer,
// following the answer as it streams (only while the reader is at the bottom), and source cards that
// stay on screen and expand to the full passage. The live updates themselves (fragments, a message
// whose target is not on the page yet, the connection state) are live.js's, as on every page.
(function () {
  "use strict";

  const messages = document.getElementById("messages");
  const composer = document.getElementById("composer");
  const question = document.getElementById("question");
  if (!composer || !question) return;

  // ---- composer: Enter to send, a length counter, and the text kept until the server takes it --
  const MAX = parseInt(composer.dataset.max || "0", 10);
  const count = document.getElementById("question-count");
  const send = composer.querySelector(".composer-send");
  let waiting = false; // a question waits for the answer being written
  const showNote = (text, kind) => {
    const note = document.getElementById("composer-note");
    if (!note) return;
    note.className = "composer-note" + (text ? " composer-note-" + kind : "");
    note.textContent = text;
    delete note.dataset.local;
  };
  // Why the box will not send (empty, too long), said where the server's reasons are said, and
  // taken back once it no longer holds.
  const localNote = (why, text) => {
    showNote(text, "error");
    const note = document.getElementById("composer-note");
    if (note && text) note.dataset.local = why;
  };
  const localNoteShown = (why) => {
    const note = document.getElementById("composer-note");
    return !!note && note.dataset.local === why;
  };
  const length = () => question.value.trim().length;
  const tooLong = () => MAX > 0 && length() > MAX;
  const tooLongNote = () => {
    const n = length();
    localNote("limit", `Too long to send: ${n.toLocaleString("en")} characters, ${(n - MAX).toLocaleString("en")} over the limit of ${MAX.toLocaleString("en")}. Shorten your question.`);
  };
  const grow = () => {
    question.style.height = "auto";
    question.style.height = Math.min(question.scrollHeight, 200) + "px";
  };
  const counted = () => {
    const over = tooLong();
    if (count) count.textContent = length().toLocaleString("en");
    composer.classList.toggle("over-limit", over);
    if (send) send.disabled = over;
    if (over) tooLongNote();
    else if (localNoteShown("limit")) showNote("", "");
    if (length() && localNoteShown("empty")) showNote("", "");
  };
  // Whether the box may send; if not, the reason is shown and the box keeps its text.
  const sendable = () => {
    if (!length()) {
      localNote("empty", composer.dataset.empty || "");
      question.focus();
      return false;
    }
    if (tooLong()) {
      tooLongNote();
      return false;
    }
    return true;
  };
  question.addEventListener("input", () => { grow(); counted(); });
  question.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (sendable()) composer.requestSubmit();
    }
  });
  // The landing page's form posts; a chat's is sent over its websocket (htmx:wsConfigSend below).
  if (!composer.hasAttribute("ws-send")) {
    composer.addEventListener("submit", (e) => { if (!sendable()) e.preventDefault(); });
  }
  counted();
  if (question.value) grow();
  if (!messages) return; // the landing page: a plain form that starts a new chat

  // ---- auto-scroll: follow new content only if the reader has not scrolled up -------------
  let pinned = true;
  const PIN_SLACK = 80;
  const atBottom = () => messages.scrollHeight - messages.scrollTop - messages.clientHeight < PIN_SLACK;
  const toBottom = () => { messages.scrollTop = messages.scrollHeight; };
  messages.addEventListener("scroll", () => { pinned = atBottom(); }, { passive: true });
  document.body.addEventListener("htmx:wsBeforeMessage", () => { pinned = pinned || atBottom(); });
  document.body.addEventListener("htmx:wsAfterMessage", () => { if (pinned) toBottom(); });
  toBottom();

  // The question stays in the box until the server has stored it (data-outcome="accepted" on the
  // note it sends back); a refused one stays with the reason. A question sent while an answer is
  // being written waits and goes when that answer ends; one sent while disconnected is queued by
  // the ws extension and sent on reconnect.
  let sentText = null;
  const answering = () => !!messages.querySelector('[data-status="streaming"]');
  composer.classList.toggle("answering", answering()); // Send becomes Stop while an answer streams
  // Stop names the answer it stops (a stop arriving after that answer ended must not stop the next).
  const stopButton = composer.querySelector(".composer-stop");
  const stopAnswer = document.getElementById("stop-answer");
  if (stopButton && stopAnswer) {
    stopButton.addEventListener("click", () => {
      const streaming = messages.querySelector('article[data-status="streaming"]');
      stopAnswer.value = streaming ? streaming.id.replace(/^m/, "") : "";
    });
  }
  const wait = () => {
    waiting = true;
    showNote("Your question will be sent when the current answer is finished.", "info");
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "btn btn-ghost btn-sm composer-cancel";
    cancel.textContent = "Don't send";
    cancel.addEventListener("click", () => { waiting = false; showNote("", ""); question.focus(); });
    const note = document.getElementById("composer-note");
    if (note) note.append(" ", cancel);
  };
  document.body.addEventListener("htmx:wsConfigSend", (e) => {
    if (e.target !== composer) return;
    if (!sendable()) { e.preventDefault(); return; }
    if (answering()) { e.preventDefault(); wait(); return; }
    sentText = question.value;
    composer.classList.add("sending");
  });
  // ---- edit the latest question and ask it again: its text goes into the composer, whose
  // hidden "edit" field (sent only while enabled) tells the server which question it replaces --
  const editField = document.getElementById("composer-edit");
  let textBeforeEdit = null;
  const editing = () => editField && !editField.disabled;
  const stopEditing = (restore) => {
    if (!editing()) return;
    editField.disabled = true;
    editField.value = "";
    composer.classList.remove("editing");
    if (restore && textBeforeEdit !== null) question.value = textBeforeEdit;
    textBeforeEdit = null;
    showNote("", "");
    grow();
    counted();
  };
  // Every question shows Edit; where it cannot be edited, Edit says why when pressed (and on hover):
  // only the latest question can be, unless it went to a person, and not while an answer is being
  // written (the server refuses the same, in the same words: #messages holds them).
  const editReason = (article, last) => {
    if (article !== last) return messages.dataset.editLast || "";
    // A question that went to a person stays as asked.
    if (messages.querySelector(`[data-reply-to="${article.id.slice(1)}"][data-routed]`)) return messages.dataset.editRouted || "";
    if (answering()) return messages.dataset.editBusy || "";
    return "";
  };
  const markEditable = () => {
    const users = messages.querySelectorAll(".msg-user");
    const last = users.length ? users[users.length - 1] : null;
    messages.querySelectorAll(".msg-edit").forEach((b) => {
      const reason = editReason(b.closest(".msg-user"), last);
      b.hidden = false;
      b.setAttribute("aria-disabled", reason ? "true" : "false");
      b.dataset.reason = reason;
      if (reason) b.title = reason;
      else b.removeAttribute("title");
    });
  };
  messages.addEventListener("click", (e) => {
    const button = e.target.closest(".msg-edit");
    if (!button || !editField) return;
    if (button.getAttribute("aria-disabled") === "true") {
      markEditable(); // the reason as things stand now
      if (button.dataset.reason) showNote(button.dataset.reason, "info");
      return;
    }
    if (!editing()) textBeforeEdit = question.value;
    editField.value = button.dataset.edit;
    editField.disabled = false;
    composer.classList.add("editing");
    question.value = button.dataset.editText || "";
    const note = document.getElementById("composer-note");
    if (note) {
      note.className = "composer-note composer-note-info";
      note.textContent = "Editing your last question: sending it replaces its answer.";
      const cancel = document.createElement("button");
      cancel.type = "button";
      cancel.className = "btn btn-ghost btn-sm composer-cancel";
      cancel.textContent = "Cancel edit";
      cancel.addEventListener("click", () => { stopEditing(true); question.focus(); });
      note.append(" ", cancel);
    }
    grow();
    counted();
    question.focus();
    question.setSelectionRange(question.value.length, question.value.length);
  });
  question.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && editing()) { e.preventDefault(); stopEditing(true); }
  });
  markEditable();

  document.body.addEventListener("htmx:wsAfterMessage", () => {
    const note = document.getElementById("composer-note");
    const outcome = note && note.dataset.outcome;
    if (outcome) {
      delete note.dataset.outcome;
      composer.classList.remove("sending");
      if (outcome === "accepted") {
        if (editing()) stopEditing(false);
        if (sentText !== null && question.value.trim() === sentText.trim()) {
          question.value = "";
          grow();
          counted();
        }
        pinned = true;
        toBottom();
      } else if (outcome === "busy") {
        wait();
      }
      sentText = null;
    }
    composer.classList.toggle("answering", answering());
    markEditable();
    // A "please wait" that answered a button (retry, regenerate) goes once the answer has ended.
    const transient = document.getElementById("composer-note");
    if (transient && transient.dataset.transient !== undefined && !answering()) {
      delete transient.dataset.transient;
      showNote("", "");
    }
    if (waiting && !answering()) {
      waiting = false;
      showNote("", "");
      if (question.value.trim()) composer.requestSubmit();
    }
  });

  // ---- source cards: keep on screen, expand to the full passage ----------------------------
  const place = (cite) => {
    const card = cite.querySelector(".cite-card");
    if (!card) return;
    cite.classList.remove("place-left", "place-above");
    const r = cite.getBoundingClientRect();
    if (r.left + 360 > window.innerWidth) cite.classList.add("place-left");
    if (r.bottom + 280 > window.innerHeight && r.top > 300) cite.classList.add("place-above");
  };
  // Resting on a marker expands its card from the 200-char snippet to the full passage.
  const EXPAND_AFTER_MS = 600;
  let expandTimer = null;
  const expand = (card, open) => {
    card.classList.toggle("expanded", open);
    const more = card.querySelector(".cite-more");
    if (more) {
      more.setAttribute("aria-expanded", String(open));
      more.textContent = open ? "Show less" : "Show full passage";
    }
  };
  // One card open at a time. A card's own controls (close, full passage, open document) are
  // tab stops only while it is pinned open (click, tap or Enter on its marker): Tab moves marker to
  // marker. Escape, the close button, a tap or click elsewhere, or another marker close it.
  const controls = (cite) => cite.querySelectorAll(".cite-close, .cite-more, .cite-open");
  const close = (cite) => {
    // Focus inside the card goes to its marker first: a hidden control would drop it on <body>.
    const inside = cite.querySelector(".cite-card");
    if (inside && inside.contains(document.activeElement)) cite.querySelector(".cite-marker").focus();
    cite.classList.remove("pinned");
    cite.classList.add("closed");
    controls(cite).forEach((c) => c.setAttribute("tabindex", "-1"));
    const card = cite.querySelector(".cite-card");
    if (card) expand(card, false);
  };
  const closeOthers = (keep) => {
    messages.querySelectorAll(".cite.pinned, .cite:focus-within").forEach((c) => { if (c !== keep) close(c); });
  };
  const pin = (cite) => {
    closeOthers(cite);
    cite.classList.remove("closed");
    cite.classList.add("pinned");
    place(cite);
    controls(cite).forEach((c) => c.setAttribute("tabindex", "0"));
  };
  messages.addEventListener("mouseover", (e) => {
    const cite = e.target.closest && e.target.closest(".cite");
    if (!cite || cite.contains(e.relatedTarget)) return;
    if (e.target.closest(".cite-marker")) closeOthers(cite); // a card never hides the next marker
    place(cite);
    clearTimeout(expandTimer);
    const card = cite.querySelector(".cite-card");
    if (card && !cite.classList.contains("closed")) expandTimer = setTimeout(() => expand(card, true), EXPAND_AFTER_MS);
  });
  messages.addEventListener("mouseout", (e) => {
    const cite = e.target.closest && e.target.closest(".cite");
    if (!cite || cite.contains(e.relatedTarget)) return;
    clearTimeout(expandTimer);
    // A card closed while its marker keeps focus stays closed until focus moves on.
    if (!cite.contains(document.activeElement)) cite.classList.remove("closed");
    const card = cite.querySelector(".cite-card");
    if (card && !cite.classList.contains("pinned")) expand(card, false);
  });
  messages.addEventListener("focusin", (e) => {
    const cite = e.target.closest && e.target.closest(".cite");
    if (cite) { closeOthers(cite); place(cite); }
  });
  messages.addEventListener("focusout", (e) => {
    const cite = e.target.closest && e.target.closest(".cite");
    if (cite && !cite.contains(e.relatedTarget)) {
      // Focus moved on: an open card closes, and hover or focus may open it again later.
      if (cite.classList.contains("pinned")) close(cite);
      cite.classList.remove("closed");
    }
  });
  messages.addEventListener("click", (e) => {
    const target = e.target.closest ? e.target : null;
    if (!target) return;
    const shut = target.closest(".cite-close");
    if (shut) {
      close(shut.closest(".cite"));
      return;
    }
    const more = target.closest(".cite-more");
    if (more) {
      const card = more.closest(".cite-card");
      expand(card, !card.classList.contains("expanded"));
      return;
    }
    const marker = target.closest(".cite-marker");
    if (marker) {
      const cite = marker.closest(".cite");
      if (cite.classList.contains("pinned")) close(cite);
      else pin(cite);
    }
  });
  // A tap or click anywhere else closes an open card (phones have no hover to leave).
  document.addEventListener("click", (e) => {
    if (e.target.closest && e.target.closest(".cite")) return;
    messages.querySelectorAll(".cite.pinned, .cite:focus-within").forEach((cite) => {
      close(cite);
      if (cite.contains(document.activeElement)) document.activeElement.blur();
    });
  });
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    const cite = document.activeElement && document.activeElement.closest && document.activeElement.closest(".cite");
    if (cite) {
      close(cite);
      cite.querySelector(".cite-marker").focus(); // focus stays where the reader was
    }
  });

  // ---- copy (an answer as Markdown with its sources; a code block) and code highlighting ----
  const copyText = window.ragchatCopy; // static/js/copy.js
  messages.addEventListener("click", (e) => {
    const button = e.target.closest && e.target.closest(".msg-copy, .code-copy");
    if (!button) return;
    const text = button.classList.contains("code-copy")
      ? button.closest(".code-block").querySelector("code").textContent
      : button.dataset.copy;
    copyText(text, button);
  });
  const decorate = () => {
    messages.querySelectorAll("article:not(.status-streaming) .md pre > code:not([data-done])").forEach((code) => {
      code.dataset.done = "1";
      if (window.hljs) window.hljs.highlightElement(code);
      const pre = code.parentElement;
      const block = document.createElement("div");
      block.className = "code-block";
      pre.replaceWith(block);
      const button = document.createElement("button");
      button.type = "button";
      button.className = "btn btn-sm code-copy";
      button.textContent = "Copy code";
      block.append(button, pre);
    });
  };
  decorate();
  document.body.addEventListener("htmx:wsAfterMessage", decorate);

  // ---- answer versions (a regenerated question): one shown at a time, "‹ 2 / 3 ›" switches ----
  const versionGroups = () => {
    const groups = new Map();
    messages.querySelectorAll("article[data-reply-to][data-role=assistant]").forEach((a) => {
      const key = a.dataset.replyTo;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(a);
    });
    return groups;
  };
  const showVersion = (group, index) => {
    group.forEach((a, i) => {
      a.hidden = i !== index;
      const count = a.querySelector(".ver-count");
      if (count) count.textContent = `${i + 1} / ${group.length}`;
      a.querySelectorAll(".ver-step").forEach((b) => {
        const to = i + parseInt(b.dataset.step, 10);
        b.disabled = to < 0 || to >= group.length;
      });
    });
  };
  const refreshVersions = () => {
    versionGroups().forEach((group) => {
      if (group.length < 2) return;
      const shown = group.findIndex((a) => !a.hidden);
      showVersion(group, shown < 0 ? group.length - 1 : shown);
    });
  };
  messages.addEventListener("click", (e) => {
    const step = e.target.closest && e.target.closest(".ver-step");
    if (!step) return;
    const article = step.closest("article");
    const group = versionGroups().get(article.dataset.replyTo) || [article];
    const to = group.indexOf(article) + parseInt(step.dataset.step, 10);
    if (to < 0 || to >= group.length) return;
    showVersion(group, to);
    const next = group[to].querySelector(`.ver-step[data-step="${step.dataset.step}"]`);
    (next && !next.disabled ? next : group[to].querySelector(".ver-step:not([disabled])") || group[to]).focus();
  });
  refreshVersions();
  document.body.addEventListener("htmx:wsAfterMessage", refreshVersions);
})();
