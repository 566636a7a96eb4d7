// Croniq dashboard: the keyboard palette. Ctrl+K (Cmd+K) anywhere, or "/"
// outside a text field, opens it; typing filters the pages, jobs and runners
// the user may read (one answer of the palette URL, read when it first
// opens); arrows move, Enter jumps, Escape closes. No dependencies.
"use strict";

(function () {
  var script = document.currentScript;
  var url = script && script.dataset.paletteUrl;
  var SHOWN = 50;
  var entries = null; // [{kind, name, url, text}], once read
  var loading = null;
  var overlay, input, list, status;
  var matches = [];
  var chosen = 0;

  function fill(template, name) {
    return template.split("__name__").join(encodeURIComponent(name));
  }

  function read() {
    if (loading) return loading;
    loading = fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (answer) {
        if (!answer.ok) throw new Error("HTTP " + answer.status);
        return answer.json();
      })
      .then(function (body) {
        var found = [];
        body.pages.forEach(function (page) {
          found.push({ kind: "page", name: page.name, url: page.url, text: page.name.toLowerCase() });
        });
        body.jobs.forEach(function (job) {
          found.push({
            kind: "job", name: job.name, url: fill(body.urls.job, job.name), tags: job.tags,
            text: (job.name + " " + job.tags.join(" ")).toLowerCase(),
          });
        });
        body.runners.forEach(function (runner) {
          found.push({
            kind: "runner", name: runner.name, url: fill(body.urls.runner, runner.name),
            text: runner.name.toLowerCase(),
          });
        });
        entries = found;
      })
      .catch(function (error) {
        loading = null; // asked again at the next opening
        status.textContent = "Could not read the list (" + error.message + ").";
      });
    return loading;
  }

  // Every word typed must be in the entry (its name, a job's tags); names
  // that start with what is typed come first, then names holding it.
  function rank(entry, words, typed) {
    for (var i = 0; i < words.length; i++) {
      if (entry.text.indexOf(words[i]) < 0) return -1;
    }
    var name = entry.name.toLowerCase();
    if (name.indexOf(typed) === 0) return 0;
    if (name.indexOf(typed) > 0) return 1;
    return 2;
  }

  function search() {
    if (!entries) return;
    var typed = input.value.trim().toLowerCase();
    var words = typed.split(/\s+/).filter(Boolean);
    var ranked = [];
    entries.forEach(function (entry, index) {
      var score = words.length ? rank(entry, words, typed) : entry.kind === "page" ? 0 : 3;
      if (score >= 0) ranked.push([score, index, entry]);
    });
    ranked.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
    matches = ranked.slice(0, SHOWN).map(function (item) { return item[2]; });
    chosen = 0;
    draw(ranked.length);
  }

  function draw(total) {
    list.textContent = "";
    matches.forEach(function (entry, index) {
      var item = document.createElement("li");
      item.id = "palette-option-" + index;
      item.setAttribute("role", "option");
      item.dataset.kind = entry.kind;
      item.dataset.url = entry.url;
      var kind = document.createElement("span");
      kind.className = "kind";
      kind.textContent = entry.kind;
      var name = document.createElement("span");
      name.className = "name";
      name.textContent = entry.name;
      item.appendChild(kind);
      item.appendChild(name);
      if (entry.tags && entry.tags.length) {
        var tags = document.createElement("span");
        tags.className = "tags";
        tags.textContent = entry.tags.join(" ");
        item.appendChild(tags);
      }
      item.addEventListener("mousedown", function (event) {
        event.preventDefault(); // keep the focus in the input
        jump(entry);
      });
      list.appendChild(item);
    });
    status.textContent = total ? (total > SHOWN ? SHOWN + " of " + total + " shown" : total + " found") : "Nothing matches.";
    mark();
  }

  function mark() {
    Array.prototype.forEach.call(list.children, function (item, index) {
      item.setAttribute("aria-selected", index === chosen ? "true" : "false");
    });
    if (matches.length) {
      input.setAttribute("aria-activedescendant", "palette-option-" + chosen);
      list.children[chosen].scrollIntoView({ block: "nearest" });
    } else {
      input.removeAttribute("aria-activedescendant");
    }
  }

  function jump(entry) {
    close();
    window.location.assign(entry.url);
  }

  function build() {
    overlay = document.createElement("div");
    overlay.className = "palette";
    overlay.hidden = true;
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-modal", "true");
    overlay.setAttribute("aria-label", "Jump to a job, runner or page");
    overlay.innerHTML =
      '<div class="palette-box">' +
      '<input type="text" role="combobox" aria-expanded="true" aria-controls="palette-options" ' +
      'aria-autocomplete="list" placeholder="Jump to a job, runner or page…" autocomplete="off" spellcheck="false">' +
      '<ul id="palette-options" role="listbox"></ul>' +
      '<p class="palette-status" aria-live="polite"></p></div>';
    input = overlay.querySelector("input");
    list = overlay.querySelector("ul");
    status = overlay.querySelector(".palette-status");
    input.addEventListener("input", search);
    input.addEventListener("keydown", function (event) {
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        if (!matches.length) return;
        var step = event.key === "ArrowDown" ? 1 : -1;
        chosen = (chosen + step + matches.length) % matches.length;
        mark();
      } else if (event.key === "Enter") {
        event.preventDefault();
        if (matches[chosen]) jump(matches[chosen]);
      } else if (event.key === "Escape") {
        event.preventDefault();
        close();
      }
    });
    overlay.addEventListener("mousedown", function (event) {
      if (event.target === overlay) close(); // a click beside the box
    });
    document.body.appendChild(overlay);
  }

  var before = null; // where the focus was, given back on closing

  function open() {
    if (!overlay) build();
    if (!overlay.hidden) return;
    before = document.activeElement;
    overlay.hidden = false;
    input.value = "";
    input.focus();
    status.textContent = entries ? "" : "Reading…";
    read().then(search);
  }

  function close() {
    if (!overlay || overlay.hidden) return;
    // Blur the input before hiding it: a hidden element keeps the focus
    // until the browser's next style update, so a key pressed meanwhile
    // ("/" again) would reach the hidden input, not the page. `before` is
    // often the body, which takes no focus and so would not take it back.
    input.blur();
    overlay.hidden = true;
    if (before && before.focus) before.focus();
  }

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }

  document.addEventListener("keydown", function (event) {
    var combo = (event.ctrlKey || event.metaKey) && !event.altKey && (event.key === "k" || event.key === "K");
    var slash = event.key === "/" && !event.ctrlKey && !event.metaKey && !event.altKey && !typing(event.target);
    if (combo || slash) {
      event.preventDefault();
      if (overlay && !overlay.hidden && combo) close();
      else open();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-palette-open]").forEach(function (button) {
      button.addEventListener("click", open);
    });
  });

  window.CroniqPalette = { open: open, close: close };
})();
