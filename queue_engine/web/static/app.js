// queue-web dashboard glue (plain JS, no build step).
//
// One EventSource per tab listens to /events: each "fleet" event means the
// server's shared aggregator has new figures. We update the header totals from
// the event itself and fire "qe:fleet" on <body>; page parts that show live
// figures carry hx-trigger="qe:fleet from:body" and re-fetch their fragment
// (rendered from the same in-memory snapshot, so no database work per tab).
// When the stream is down the browser reconnects by itself; meanwhile a slow
// poll (every 15 s) keeps the page moving.
(function () {
  "use strict";
  var dot = document.getElementById("live-dot");
  var lastVersion = null;
  var fallback = null;

  function setLive(on) {
    if (dot) {
      dot.classList.toggle("on", on);
      dot.title = on ? "live: updates pushed by the server" : "reconnecting; polling every 15 s";
    }
    if (on && fallback) { clearInterval(fallback); fallback = null; }
    if (!on && !fallback) {
      fallback = setInterval(function () { htmx.trigger(document.body, "qe:fleet"); }, 15000);
    }
  }

  function showTotals(data) {
    Object.keys(data).forEach(function (key) {
      document.querySelectorAll('[data-fleet="' + key + '"]').forEach(function (el) {
        el.textContent = data[key] === null ? "-" : String(data[key]);
      });
    });
  }

  if (window.EventSource && document.body.dataset.events) {
    var source = new EventSource(document.body.dataset.events);
    source.addEventListener("open", function () { setLive(true); });
    source.addEventListener("error", function () { setLive(false); });
    source.addEventListener("fleet", function (ev) {
      var data = JSON.parse(ev.data);
      setLive(true);
      showTotals(data);
      if (lastVersion !== null && data.version !== lastVersion) {
        htmx.trigger(document.body, "qe:fleet", data);
      }
      lastVersion = data.version;
    });
  } else {
    setLive(false);
  }

  // Bulk actions: ask for the preview count before anything is changed.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      ev.preventDefault();
    }
  });
})();
