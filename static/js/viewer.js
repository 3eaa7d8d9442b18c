// The document viewer: outline the cited passage on a PDF page and bring it into view. The boxes
// come as fractions of the page (data-boxes="left,top,right,bottom;…"); the CSP allows no inline
// style, so they are placed here. Without script the page's text beside it is marked instead.
(function () {
  "use strict";

  function outline(figure) {
    const boxes = (figure.dataset.boxes || "").split(";").filter(Boolean);
    const hits = boxes.map((box) => {
      const [left, top, right, bottom] = box.split(",").map(Number);
      const hit = document.createElement("mark");
      hit.className = "pdf-hit";
      hit.setAttribute("aria-hidden", "true");
      hit.style.left = `${left * 100}%`;
      hit.style.top = `${top * 100}%`;
      hit.style.width = `${(right - left) * 100}%`;
      hit.style.height = `${(bottom - top) * 100}%`;
      figure.appendChild(hit);
      return hit;
    });
    const anchor = figure.querySelector(".pdf-hit-anchor");
    if (anchor && hits.length) {
      anchor.style.top = hits[0].style.top;
      anchor.style.left = hits[0].style.left;
    }
    return hits;
  }

  let hits = [];

  function place() {
    const figure = document.querySelector(".pdf-page[data-boxes]");
    hits = figure ? outline(figure) : [];
  }

  // After the load, so the browser's own jump to #passage is over and the page image has its size.
  function show() {
    const target = hits[0] || document.getElementById("passage");
    if (target && (location.hash === "#passage" || hits.length)) {
      // Centred, so its heading above and the sticky top bar leave it in sight; a passage taller
      // than most of the window starts at the top instead.
      const tall = target.getBoundingClientRect().height > window.innerHeight * 0.7;
      target.scrollIntoView({ block: tall ? "start" : "center" });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", place);
  else place();
  if (document.readyState === "complete") show();
  else window.addEventListener("load", show);
})();
