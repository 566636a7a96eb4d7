// The job form's live preview: as the schedule, timezone, calendar,
// calendar policy, name (it seeds the H forms) or the further schedules,
// one-shot instants, bounds and max_runs change, ask the admin's preview view (scheduler.jobs.previews)
// for the next fire times and list them under the form's schedule fields.
// Blocked candidates are struck through; their reason is the title (hover),
// as for the months an @business_day job has no occurrence in.
(function () {
  "use strict";

  var script = document.currentScript;
  var FIELDS = ["schedule", "timezone", "calendar", "calendar_policy", "name", "jitter",
    // More schedules, one-shot instants, bounds (date and time inputs) and max_runs.
    "schedules", "at", "max_runs", "not_before_0", "not_before_1", "not_after_0", "not_after_1"];
  var WAIT_MS = 250; // typing pauses this long before we ask

  function start() {
    var schedule = document.getElementById("id_schedule");
    if (!schedule || !script) return; // a read-only view of the job: nothing typed
    var box = previewBox(schedule);
    var state = { more: false, asked: 0, timer: null };

    function refresh() {
      clearTimeout(state.timer);
      state.timer = setTimeout(function () { ask(box, state); }, WAIT_MS);
    }
    FIELDS.forEach(function (name) {
      var input = document.getElementById("id_" + name);
      if (!input) return;
      ["input", "change"].forEach(function (kind) {
        input.addEventListener(kind, function () { state.more = false; refresh(); });
      });
    });
    box.addEventListener("click", function (event) {
      if (!event.target.matches("[data-preview-more]")) return;
      state.more = true;
      ask(box, state);
    });
    ask(box, state);
  }

  function previewBox(schedule) {
    var fieldset = schedule.closest("fieldset") || schedule.form;
    var row = document.createElement("div");
    row.className = "form-row field-fire-preview";
    row.innerHTML =
      '<div><div class="flex-container"><label>Fire times as typed:</label>' +
      '<div class="readonly" data-fire-preview aria-live="polite"></div></div></div>';
    fieldset.appendChild(row);
    return row.querySelector("[data-fire-preview]");
  }

  function query(state) {
    var params = new URLSearchParams();
    FIELDS.forEach(function (name) {
      var input = document.getElementById("id_" + name);
      if (input) params.set(name, input.value);
    });
    if (script.dataset.jobId) params.set("job", script.dataset.jobId);
    if (state.more) params.set("more", "1");
    return script.dataset.previewUrl + "?" + params.toString();
  }

  function ask(box, state) {
    var asked = ++state.asked;
    var typed = ["schedule", "schedules", "at"].some(function (name) {
      var input = document.getElementById("id_" + name);
      return input && input.value.trim();
    });
    if (!typed) {
      // Nothing typed yet (a new job): nothing to ask about.
      render(box, { entries: [], reason: "Type a schedule to see its next fire times." });
      return;
    }
    box.setAttribute("aria-busy", "true");
    fetch(query(state), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().catch(function () {
          return { error: "the preview answered " + response.status };
        });
      })
      .then(function (answer) {
        if (asked !== state.asked) return; // an older answer arriving late
        render(box, answer);
      })
      .catch(function () {
        if (asked === state.asked) render(box, { error: "the preview could not be reached" });
      });
  }

  function render(box, answer) {
    box.removeAttribute("aria-busy");
    box.textContent = "";
    if (answer.error) {
      box.appendChild(element("p", "errornote", answer.error)).setAttribute("data-preview-error", "");
      return;
    }
    if (answer.anchor) box.appendChild(element("p", "help", "@every " + answer.anchor));
    if (!answer.entries.length) {
      box.appendChild(element("p", "help", answer.reason));
      return;
    }
    var list = box.appendChild(element("ol", "", ""));
    answer.entries.forEach(function (entry) { list.appendChild(item(entry)); });
    if (answer.more) {
      var more = box.appendChild(element("button", "button", "Show more"));
      more.type = "button";
      more.setAttribute("data-preview-more", "");
    }
  }

  function item(entry) {
    var li = element("li", entry.blocked ? "blocked" : "", "");
    // A skipped month (@business_day with too few allowed days) has no time.
    var tag = entry.skipped ? "span" : entry.blocked ? "del" : "time";
    var time = li.appendChild(element(tag, "", entry.wall));
    if (!entry.skipped) time.setAttribute("datetime", entry.at);
    if (entry.utc) li.appendChild(element("span", "quiet", " (" + entry.utc + ")"));
    if (entry.blocked) {
      // Not numbered: the numbers count the fire times.
      li.style.listStyleType = "none";
      li.style.counterIncrement = "list-item 0";
      li.title = entry.reason;
      li.appendChild(element("span", "quiet", entry.skipped ? " no occurrence" : " blocked"));
    }
    return li;
  }

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text) node.textContent = text;
    return node;
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
