// The chat list as a drawer on phones and narrow windows (below 760 px the sidebar is hidden):
// a "Chats" button opens it over the page; Escape, the backdrop or a chosen chat closes it, and
// focus goes back to the button. Wider windows show the sidebar and never see the button.
(function () {
  "use strict";
  const sidebar = document.getElementById("chat-sidebar");
  const layout = sidebar && sidebar.closest(".chat-layout");
  if (!layout) return;
  const backdrop = layout.querySelector(".drawer-backdrop");
  let opener = null;

  const setOpen = (open, from) => {
    layout.classList.toggle("drawer-open", open);
    if (backdrop) backdrop.hidden = !open;
    document.querySelectorAll("[aria-controls=chat-sidebar]").forEach((b) => b.setAttribute("aria-expanded", String(open)));
    if (open) {
      opener = from || null;
      const first = sidebar.querySelector("#chat-search-q, a");
      if (first) first.focus();
    } else if (opener) {
      opener.focus();
      opener = null;
    }
  };
  document.addEventListener("click", (e) => {
    const toggle = e.target.closest && e.target.closest("[aria-controls=chat-sidebar]");
    if (toggle) { setOpen(!layout.classList.contains("drawer-open"), toggle); return; }
    if (e.target.closest && e.target.closest("[data-drawer-close]")) setOpen(false);
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && layout.classList.contains("drawer-open")) setOpen(false);
  });
})();
