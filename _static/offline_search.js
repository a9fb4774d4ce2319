/* Search results with a snippet when the book is opened from disk (file://).
   Sphinx's search page fetches each result's page to cut a snippet from it; a browser
   refuses fetch() on file:// (one CORS console error per result, and no snippet).
   Opened from disk, this page answers those fetches from _static/search_text.js (each
   page's text, written at build time by book/_ext/reader_pages.py), loaded on first
   use. Over HTTP, and on every other page, it does nothing. */
(function () {
  if (location.protocol !== "file:" || !window.fetch) return;
  var root = document.documentElement.dataset.content_root || "./";
  var loaded = null;
  function pageTexts() {
    if (!loaded) {
      loaded = new Promise(function (resolve) {
        var script = document.createElement("script");
        script.src = root + "_static/search_text.js";
        script.onload = function () { resolve(window.BOOK_SEARCH_TEXT || {}); };
        script.onerror = function () { resolve({}); };
        document.head.appendChild(script);
      });
    }
    return loaded;
  }
  var fetchFromServer = window.fetch.bind(window);
  window.fetch = function (resource, options) {
    var url = new URL(String(resource), location.href);
    var base = new URL(root, location.href);
    if (url.protocol !== "file:" || !/\.html$/.test(url.pathname) ||
        url.href.indexOf(base.href) !== 0) {
      return fetchFromServer(resource, options);
    }
    var page = decodeURIComponent(url.pathname.slice(base.pathname.length));
    return pageTexts().then(function (texts) {
      var main = document.createElement("div");
      main.setAttribute("role", "main");
      main.textContent = texts[page] || "";
      return new Response("<html><body>" + main.outerHTML + "</body></html>",
                          {status: 200, headers: {"Content-Type": "text/html"}});
    });
  };
})();
