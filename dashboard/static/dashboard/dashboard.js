// Croniq dashboard: local times and the live log tail. No dependencies but
// core/static/croniq/instants.js, the one way a page writes an instant.
"use strict";

(function () {
  // core/static/croniq/instants.js, loaded before this script.
  var instants = window.CroniqInstants;
  var zone = instants.viewerZone();

  // The server writes UTC (dashboard_tags.when); show each instant in the
  // viewer's timezone, labelled so in its title beside the UTC value for
  // hovering. Fire times stay on the job's own clock (data-job-zone), where
  // its schedule is read, and say so in theirs.
  function localiseTimes(root) {
    root.querySelectorAll("time[datetime]:not([data-job-zone])").forEach(function (el) {
      if (el.dataset.localised) return;
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at)) return;
      var utc = el.title || el.textContent;
      el.textContent = instants.format(at);
      el.title = utc + "; shown in your zone (" + zone + ")";
      el.dataset.localised = "1";
    });
  }

  function showZone() {
    var label = document.querySelector("[data-viewer-tz]");
    if (label) label.textContent = "Times in your zone, " + zone + "; fire times in the job's (UTC on hover)";
  }

  // While an execution is pending or running, ask for new log chunks every
  // second and append them; stop once it has finished.
  function tailLog(log) {
    var after = parseInt(log.dataset.after, 10);
    var url = log.dataset.url;
    var stateBadge = document.querySelector("[data-execution-state] .state");
    var indicator = document.querySelector("[data-live-indicator]");
    var liveness = document.querySelector("[data-liveness]");

    // A running run whose runner went silent (or whose lease ran out): the
    // server's words (dispatch.liveness.run_liveness), and a dot that
    // stands still; both back to "live" when the runner speaks again.
    function showLiveness(said) {
      if (liveness) {
        liveness.hidden = !said;
        liveness.textContent = said ? said.text : "";
        if (said) liveness.dataset.kind = said.kind;
        else delete liveness.dataset.kind;
      }
      if (indicator) {
        indicator.classList.toggle("live-stalled", !!said);
        indicator.textContent = said ? said.label : "live";
      }
    }

    function atBottom() {
      return log.scrollHeight - log.scrollTop - log.clientHeight < 30;
    }

    function poll() {
      fetch(url + "?after=" + after, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (answer) {
          // Signed out meanwhile: reloading leads to the login page.
          if (answer.redirected || answer.status === 403) {
            window.location.reload();
            return null;
          }
          if (!answer.ok) throw new Error("HTTP " + answer.status);
          return answer.json();
        })
        .then(function (body) {
          if (!body) return;
          var follow = atBottom();
          body.chunks.forEach(function (chunk) {
            log.appendChild(document.createTextNode(chunk.data));
            after = chunk.seq;
          });
          log.dataset.after = String(after);
          if (follow) log.scrollTop = log.scrollHeight;
          if (stateBadge) {
            stateBadge.textContent = body.state_label;
            stateBadge.className = "state state-" + body.state;
          }
          // Runner, start, end, exit code: server-rendered, escaped HTML.
          Object.keys(body.fields || {}).forEach(function (name) {
            var field = document.querySelector('[data-field="' + name + '"]');
            if (field && field.dataset.html !== body.fields[name]) {
              field.innerHTML = body.fields[name];
              field.dataset.html = body.fields[name];
              localiseTimes(field);
            }
          });
          if (body.live || body.more) {
            showLiveness(body.liveness);
            setTimeout(poll, body.more ? 0 : 1000);
          } else {
            delete log.dataset.live;
            if (indicator) indicator.remove();
            if (liveness) liveness.remove();
          }
        })
        .catch(function () {
          setTimeout(poll, 3000);
        });
    }
    setTimeout(poll, 1000);
  }

  // Buttons with data-confirm (run now, forget) ask before they post. One
  // listener on the document: rows the runners page puts in place later
  // ask too.
  function confirmActions(root) {
    root.addEventListener("submit", function (event) {
      var button = event.target.querySelector("button[data-confirm]");
      if (button && !window.confirm(button.dataset.confirm)) event.preventDefault();
    });
  }

  // The runners page asks the server for its rows every few seconds and
  // puts them in place: state (silent, offline), "last seen" and the
  // buttons that apply, all judged on the server's clock
  // (dispatch.liveness), so a browser whose clock is off shows the same.
  // Only the cells whose served HTML changed are replaced (a form's CSRF
  // token, masked anew in each answer, left out of the comparison), so a
  // button is not swapped under the pointer for nothing.
  function followRunners(table) {
    var url = table.dataset.rowsUrl;
    var every = parseFloat(table.dataset.pollSeconds) * 1000;
    var rows = table.querySelector("tbody[data-runner-rows]");

    function served(cell) {
      return cell.innerHTML.replace(/(name="csrfmiddlewaretoken") value="[^"]*"/g, "$1");
    }

    function names(body) {
      return Array.prototype.map.call(body.rows, function (row) { return row.dataset.runner; }).join("\n");
    }

    function mark(body) {
      Array.prototype.forEach.call(body.querySelectorAll("td"), function (cell) {
        cell.croniqServed = served(cell);
      });
    }

    function place(html) {
      var fresh = document.createElement("tbody");
      fresh.innerHTML = html;
      mark(fresh);
      if (names(fresh) !== names(rows)) {
        rows.replaceChildren.apply(rows, Array.prototype.slice.call(fresh.rows));
        localiseTimes(rows);
        return;
      }
      Array.prototype.slice.call(fresh.rows).forEach(function (row, i) {
        var shown = rows.rows[i];
        shown.dataset.state = row.dataset.state;
        Array.prototype.slice.call(row.cells).forEach(function (cell, j) {
          var old = shown.cells[j];
          if (old && old.croniqServed === cell.croniqServed) return;
          if (old) shown.replaceChild(cell, old);
          else shown.appendChild(cell);
          localiseTimes(cell);
        });
      });
    }

    mark(rows);
    function poll() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (answer) {
          if (answer.redirected || answer.status === 403) {
            window.location.reload();
            return null;
          }
          if (!answer.ok) throw new Error("HTTP " + answer.status);
          return answer.json();
        })
        .then(function (body) {
          if (body) place(body.html);
          setTimeout(poll, every);
        })
        .catch(function () {
          setTimeout(poll, Math.max(every, 3000));
        });
    }
    setTimeout(poll, every);
  }

  // The overview's bulk actions: a box ticks every job of the page, the
  // count of ticked jobs is kept beside "the ticked jobs", and ticking a
  // job chooses them over "all matching the filter". The server asks for
  // the confirmation (dashboard.bulk).
  function tickJobs(form) {
    var boxes = document.querySelectorAll('input[type=checkbox][name=job][form="' + form.id + '"]');
    var page = document.querySelector("[data-tick-page]");
    var count = form.querySelector("[data-ticked-count]");
    var ticked = form.querySelector("input[name=scope][value=selected]");
    function update() {
      var n = 0;
      boxes.forEach(function (box) { if (box.checked) n++; });
      count.textContent = n + " ticked";
      if (page) {
        page.checked = n > 0 && n === boxes.length;
        page.indeterminate = n > 0 && n < boxes.length;
      }
      return n;
    }
    boxes.forEach(function (box) {
      box.addEventListener("change", function () {
        if (update() > 0) ticked.checked = true;
      });
    });
    if (page) {
      page.hidden = boxes.length === 0;
      page.addEventListener("change", function () {
        boxes.forEach(function (box) { box.checked = page.checked; });
        if (update() > 0) ticked.checked = true;
      });
    }
    update();
  }

  document.addEventListener("DOMContentLoaded", function () {
    showZone();
    confirmActions(document);
    var bulk = document.querySelector("form#bulk");
    if (bulk) tickJobs(bulk);
    var runners = document.querySelector("table.runners[data-rows-url]");
    if (runners) followRunners(runners);
    localiseTimes(document);
    var log = document.querySelector("pre.log[data-live]");
    if (log) tailLog(log);
  });
})();
