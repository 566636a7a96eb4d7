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
            setTimeout(poll, body.more ? 0 : 1000);
          } else {
            delete log.dataset.live;
            if (indicator) indicator.remove();
          }
        })
        .catch(function () {
          setTimeout(poll, 3000);
        });
    }
    setTimeout(poll, 1000);
  }

  // Buttons with data-confirm (run now, forget) ask before they post.
  function confirmActions(root) {
    root.querySelectorAll("button[data-confirm]").forEach(function (button) {
      button.form.addEventListener("submit", function (event) {
        if (!window.confirm(button.dataset.confirm)) event.preventDefault();
      });
    });
  }

  // "last seen 17 s ago" on the runners page, counted on from the ISO time
  // of the last heartbeat, and coloured as the server does
  // (dispatch.coverage.liveness): yellow after one missed heartbeat, red past
  // the offline threshold until the loop marks it offline.
  function ago(seconds) {
    var units = [["d", 86400], ["h", 3600], ["min", 60]];
    for (var i = 0; i < units.length; i++) {
      if (seconds >= units[i][1]) return Math.floor(seconds / units[i][1]) + " " + units[i][0] + " ago";
    }
    return seconds + " s ago";
  }

  function tickLastSeen(table) {
    var quietAfter = parseFloat(table.dataset.quietAfter);
    var offlineAfter = parseFloat(table.dataset.offlineAfter);
    function tick() {
      table.querySelectorAll("[data-seen-live]").forEach(function (cell) {
        var age = Math.max(0, Math.floor((Date.now() - new Date(cell.dataset.lastSeen)) / 1000));
        var text = cell.querySelector("[data-seen-ago]");
        if (text) text.textContent = "last seen " + ago(age);
        var kind = age > offlineAfter ? "silent" : age > quietAfter ? "quiet" : "fresh";
        cell.className = "seen seen-" + kind;
      });
    }
    tick();
    setInterval(tick, 1000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    showZone();
    confirmActions(document);
    var runners = document.querySelector("table.runners[data-quiet-after]");
    if (runners) tickLastSeen(runners);
    localiseTimes(document);
    var log = document.querySelector("pre.log[data-live]");
    if (log) tailLog(log);
  });
})();
