// episodic console: the little behaviour htmx attributes cannot express without eval
// (the Content-Security-Policy forbids inline scripts and eval). Every page works without
// this file; it only adds focus handling and pausing of live updates.
(function () {
  "use strict";

  var lastMark = null;

  // Live updates (the pipeline panel polls): paused by the checkbox, and while focus is
  // inside the panel, so a keyboard or screen-reader user is never thrown out of it.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail && evt.detail.elt;
    if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-live")) {
      return;
    }
    var box = document.getElementById("live-updates");
    if ((box && !box.checked) || elt.contains(document.activeElement)) {
      evt.preventDefault();
    }
  });

  // Timeline: an episode's link (click, or Enter when focused) loads its details into the
  // panel and moves focus there; the link keeps working without scripts.
  document.addEventListener("click", function (evt) {
    if (!window.htmx || evt.button !== 0 || evt.ctrlKey || evt.metaKey || evt.shiftKey) {
      return;
    }
    var mark = evt.target && evt.target.closest ? evt.target.closest("[data-details]") : null;
    var panel = document.getElementById("details");
    if (!mark || !panel) {
      return;
    }
    evt.preventDefault();
    lastMark = mark;
    var previous = document.querySelectorAll(".mark.selected");
    for (var i = 0; i < previous.length; i++) {
      previous[i].classList.remove("selected");
    }
    mark.classList.add("selected");
    window.htmx
      .ajax("GET", mark.getAttribute("data-details"), { target: "#details", swap: "innerHTML" })
      .then(function () {
        panel.focus();
        var href = mark.getAttribute("href");
        if (href && window.history && window.history.replaceState) {
          window.history.replaceState(null, "", href);
        }
      });
  });

  // Escape in the details panel goes back to the episode it shows.
  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "Escape" || !lastMark) {
      return;
    }
    var panel = document.getElementById("details");
    if (panel && panel.contains(document.activeElement)) {
      lastMark.focus();
    }
  });

  // After a recall, focus moves to the results' heading (announced with its count).
  document.addEventListener("htmx:afterSettle", function (evt) {
    var config = evt.detail && evt.detail.requestConfig;
    var source = config && config.elt;
    if (source && source.matches && source.matches("form.recall-form")) {
      var heading = document.getElementById("results-title");
      if (heading) {
        heading.focus();
      }
    }
  });
})();
