// The documents page: after a successful upload, clear the form for the next one. (Rows arrive as
// out-of-band fragments, from the upload's answer and from the live feed: see live.js.)
(function () {
  "use strict";
  document.body.addEventListener("htmx:afterSwap", function () {
    var form = document.getElementById("upload-form");
    if (form && document.querySelector("#upload-result .upload-ok")) form.reset();
  });
})();
