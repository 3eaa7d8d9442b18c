// Chat page behaviour that HTML and CSS cannot do alone: Enter to send, clearing the composer,
// following the answer as it streams (only while the reader is at the bottom), and source cards that
// stay on screen and expand to the full passage. The live updates themselves (fragments, a message
// whose target is not on the page yet, the connection state) are live.js's, as on every page.
(function () {
  "use strict";

  const messages = document.getElementById("messages");
  const composer = document.getElementById("composer");
  const question = document.getElementById("question");
  if (!messages || !composer) return;

  // ---- auto-scroll: follow new content only if the reader has not scrolled up -------------
  let pinned = true;
  const PIN_SLACK = 80;
  const atBottom = () => messages.scrollHeight - messages.scrollTop - messages.clientHeight < PIN_SLACK;
  const toBottom = () => { messages.scrollTop = messages.scrollHeight; };
  messages.addEventListener("scroll", () => { pinned = atBottom(); }, { passive: true });
  document.body.addEventListener("htmx:wsBeforeMessage", () => { pinned = pinned || atBottom(); });
  document.body.addEventListener("htmx:wsAfterMessage", () => { if (pinned) toBottom(); });
  toBottom();

  // ---- composer -----------------------------------------------------------------------------
  const grow = () => {
    question.style.height = "auto";
    question.style.height = Math.min(question.scrollHeight, 200) + "px";
  };
  question.addEventListener("input", grow);
  question.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (question.value.trim()) composer.requestSubmit();
    }
  });
  document.body.addEventListener("htmx:wsAfterSend", (e) => {
    if (e.target === composer || composer.contains(e.target)) {
      question.value = "";
      grow();
      question.focus();
      pinned = true;
      toBottom();
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
  messages.addEventListener("mouseover", (e) => {
    const cite = e.target.closest && e.target.closest(".cite");
    if (!cite || cite.contains(e.relatedTarget)) return;
    place(cite);
    clearTimeout(expandTimer);
    const card = cite.querySelector(".cite-card");
    if (card) expandTimer = setTimeout(() => expand(card, true), EXPAND_AFTER_MS);
  });
  messages.addEventListener("mouseout", (e) => {
    const cite = e.target.closest && e.target.closest(".cite");
    if (!cite || cite.contains(e.relatedTarget)) return;
    clearTimeout(expandTimer);
    const card = cite.querySelector(".cite-card");
    if (card && !cite.classList.contains("pinned")) expand(card, false);
  });
  messages.addEventListener("focusin", (e) => {
    const cite = e.target.closest && e.target.closest(".cite");
    if (cite) place(cite);
  });
  messages.addEventListener("click", (e) => {
    const more = e.target.closest && e.target.closest(".cite-more");
    if (more) {
      const card = more.closest(".cite-card");
      expand(card, !card.classList.contains("expanded"));
      return;
    }
    const marker = e.target.closest && e.target.closest(".cite-marker");
    if (marker) marker.closest(".cite").classList.toggle("pinned");
  });
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    const cite = document.activeElement && document.activeElement.closest && document.activeElement.closest(".cite");
    if (cite) {
      cite.classList.remove("pinned");
      cite.querySelector(".cite-marker").blur();
    }
  });
})();
