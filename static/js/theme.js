// Theme: the system's light or dark setting unless the person pins one with the switch in the top
// bar (kept in localStorage). Loaded in <head> without defer, so the page never flashes the wrong
// theme; the switch is wired once the document is parsed.
// Being the one script every page runs first, it also says that script runs: <html class="no-js">
// becomes "js", and the CSS hides what needs script (.needs-script) only while it is still "no-js".
(function () {
  "use strict";
  const root = document.documentElement;
  root.classList.replace("no-js", "js");
  const KEY = "ragchat-theme";
  const apply = (theme) => {
    if (theme === "light" || theme === "dark") root.dataset.theme = theme;
    else delete root.dataset.theme;
  };
  try { apply(localStorage.getItem(KEY)); } catch (e) { /* storage blocked: follow the system */ }
  document.addEventListener("DOMContentLoaded", () => {
    const select = document.getElementById("theme-switch");
    if (!select) return;
    select.value = root.dataset.theme || "system";
    select.addEventListener("change", () => {
      apply(select.value);
      try {
        if (select.value === "system") localStorage.removeItem(KEY);
        else localStorage.setItem(KEY, select.value);
      } catch (e) { /* the choice lasts for this page only */ }
    });
  });
})();
