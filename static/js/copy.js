// Copying to the clipboard, the one way every page does it: `window.ragchatCopy(text, button)` copies
// and has the button say "Copied" for a moment; a button with data-copy-from="ID" copies the value
// (or text) of that element. Plain-HTTP pages have no clipboard API: a hidden textarea and the copy
// command stand in for it.
(function () {
  "use strict";

  const fallbackCopy = (text) => {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.append(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    area.remove();
    return ok;
  };

  const copyText = (text, button) => {
    const done = () => {
      if (!button.dataset.label) button.dataset.label = button.textContent;
      button.textContent = "Copied";
      setTimeout(() => { button.textContent = button.dataset.label; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text) && done());
    } else if (fallbackCopy(text)) {
      done();
    }
  };
  window.ragchatCopy = copyText;

  document.addEventListener("click", (e) => {
    const button = e.target.closest && e.target.closest("[data-copy-from]");
    if (!button) return;
    const source = document.getElementById(button.dataset.copyFrom);
    if (source) copyText("value" in source ? source.value : source.textContent, button);
  });
})();
