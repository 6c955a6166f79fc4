// Keeps the live part of a running task's page up to date over server-sent events.
// Without JavaScript the page is complete as loaded; reloading shows new steps.
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("[data-live]").forEach(function (element) {
    var source = new EventSource(element.getAttribute("data-live"));
    source.addEventListener("update", function (event) {
      element.innerHTML = event.data;
      if (window.htmx) { window.htmx.process(element); }
    });
    source.addEventListener("done", function () {
      source.close();
      element.removeAttribute("data-live");
    });
  });
});
