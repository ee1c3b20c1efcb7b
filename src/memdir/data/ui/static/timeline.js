// V2: the timeline stays live. Every two seconds it asks the server for its rows (HTML the
// server rendered and escaped) with the page's filters, and swaps them in when they changed.
"use strict";
(function () {
  const table = document.querySelector("table.timeline");
  const body = document.getElementById("rows");
  if (!table || !body) return;
  const live = document.getElementById("live");
  const url = table.dataset.rows + window.location.search;
  let last = body.innerHTML.trim();
  async function poll() {
    try {
      const answer = await fetch(url, { credentials: "same-origin", cache: "no-store" });
      if (answer.ok) {
        const html = (await answer.text()).trim();
        if (html !== last) {
          body.innerHTML = html;
          last = html;
        }
        if (live) live.hidden = false;
      } else if (live) {
        live.hidden = true;
      }
    } catch (e) {
      if (live) live.hidden = true;
    }
    window.setTimeout(poll, 2000);
  }
  window.setTimeout(poll, 2000);
})();
