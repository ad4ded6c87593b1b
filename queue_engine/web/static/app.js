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

  var source = null;

  function connect() {
    if (source || !window.EventSource || !document.body.dataset.events) {
      if (!source) { setLive(false); }
      return;
    }
    source = new EventSource(document.body.dataset.events);
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
  }

  // Close the stream when the page goes away: a page kept in the back-forward
  // cache would otherwise hold its connection open, and a browser allows only
  // six per server over HTTP/1.1, so a few clicks later every request waits.
  window.addEventListener("pagehide", function () {
    if (source) { source.close(); source = null; }
  });
  window.addEventListener("pageshow", function (ev) {
    if (ev.persisted) { lastVersion = null; connect(); htmx.trigger(document.body, "qe:fleet"); }
  });
  connect();

  // Bulk actions: ask for the preview count before anything is changed.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      ev.preventDefault();
    }
  });
})();
