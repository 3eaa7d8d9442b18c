// Menus made of <details data-menu> (the top bar's Menu, a chat's options): they open and close
// without script; with it, Escape closes an open one and a click or tap anywhere outside it does too.
// Escape pressed inside a menu is the menu's alone (focus goes back to its button); pressed elsewhere
// it also reaches the page's own handlers.
(function () {
  "use strict";
  const openMenus = () => [...document.querySelectorAll("details[data-menu][open]")];
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape") return;
    openMenus().forEach((menu) => {
      menu.open = false;
      if (menu.contains(document.activeElement)) {
        e.stopPropagation();
        menu.querySelector("summary").focus();
      }
    });
  }, true);
  document.addEventListener("click", (e) => {
    openMenus().forEach((menu) => { if (!menu.contains(e.target)) menu.open = false; });
  });
})();
