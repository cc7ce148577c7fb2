// The language links in the banner (tpututor_course.site): the banner is the same on every page, so each
// link is pointed at the other language's landing page from where this page sits in the site.
(function () {
  const root = document.documentElement.dataset.content_root || "./";
  const up = root === "./" ? "" : root;
  for (const a of document.querySelectorAll("a.tpututor-lang")) {
    a.setAttribute("href", up + "../" + a.dataset.lang + "/index.html");
  }
})();
