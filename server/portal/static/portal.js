// Live state without a page reload: every few seconds the page's live part is fetched again
// and swapped in, unless the person is typing in it. Pages work without this script.
(function () {
  if (document.body.dataset.live !== "true") return;
  var live = document.getElementById("live");
  setInterval(function () {
    var a = document.activeElement;
    if (a && live.contains(a) && (a.tagName === "INPUT" || a.tagName === "SELECT")) return;
    fetch(location.href, { headers: { "X-Kobe-Fragment": "1" }, credentials: "same-origin", redirect: "manual" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html !== null) { live.innerHTML = html; } })
      .catch(function () {});
  }, 3000);
})();
