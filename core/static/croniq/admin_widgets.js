// The admin's tag inputs and key/value rows (core/admin_widgets.py).
// Without this script both still work: the tags are a comma-separated
// text, and the rows offer one blank row per save.
"use strict";

(function () {
  function splitNames(text) {
    return text.split(",").map((name) => name.trim()).filter((name) => name);
  }

  // A text input of comma-separated names becomes removable tags and an
  // entry; the text input, hidden, stays what the form posts.
  function enhanceTags(input) {
    const box = document.createElement("div");
    box.className = "tags-input";
    const list = document.createElement("span");
    list.className = "tags";
    const entry = document.createElement("input");
    entry.type = "text";
    entry.className = "tag-entry";
    entry.placeholder = "add, separated by commas";
    entry.autocomplete = "off";
    // The field's label now points at the entry.
    entry.id = input.id;
    input.removeAttribute("id");
    box.append(list, entry);
    input.type = "hidden";
    input.after(box);
    let names = splitNames(input.value);

    function render() {
      input.value = names.join(", ");
      list.replaceChildren(
        ...names.map((name, index) => {
          const tag = document.createElement("span");
          tag.className = "tag";
          tag.dataset.tag = name;
          tag.textContent = name;
          const remove = document.createElement("button");
          remove.type = "button";
          remove.textContent = "×";
          remove.title = `Remove ${name}`;
          remove.addEventListener("click", () => {
            names.splice(index, 1);
            render();
          });
          tag.append(remove);
          return tag;
        }),
      );
    }

    // What is typed counts once a comma, Enter, leaving the entry or the
    // form's submit ends it.
    function commit() {
      for (const name of splitNames(entry.value)) {
        if (!names.includes(name)) names.push(name);
      }
      entry.value = "";
      render();
    }

    entry.addEventListener("input", () => {
      if (entry.value.includes(",")) commit();
    });
    entry.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        commit();
      } else if (event.key === "Backspace" && !entry.value && names.length) {
        names.pop();
        render();
      }
    });
    entry.addEventListener("blur", commit);
    input.form?.addEventListener("submit", commit);
    box.addEventListener("click", (event) => {
      if (event.target === box || event.target === list) entry.focus();
    });
    render();
  }

  function enhanceRows(widget) {
    const body = widget.querySelector("tbody");
    const template = body.querySelector("tr[data-row]:last-child").cloneNode(true);
    for (const input of template.querySelectorAll("input")) {
      input.value = "";
      input.removeAttribute("id");
    }
    function addRow() {
      const row = template.cloneNode(true);
      body.append(row);
      row.querySelector("input").focus();
    }
    widget.addEventListener("click", (event) => {
      if (event.target.matches("[data-remove-row]")) {
        event.target.closest("tr").remove();
        if (!body.querySelector("tr")) addRow();
      } else if (event.target.matches("[data-add-row]")) {
        addRow();
      }
    });
    for (const button of widget.querySelectorAll("[data-add-row], [data-remove-row]")) {
      button.hidden = false;
    }
    template.querySelector("[data-remove-row]").hidden = false;
  }

  // Checkboxes offered as another field allows (a country's holiday
  // categories): shown as that field is typed in, a ticked one always.
  function enhanceDependent(widget) {
    const other = document.getElementById(widget.dataset.dependsOn);
    if (!other) return;
    const allowed = JSON.parse(widget.dataset.allowed);
    const choices = widget.querySelectorAll("[data-choice]");
    const none = widget.querySelector("[data-none-offered]");
    function offer() {
      const names = allowed[other.value.trim()] || [];
      let any = false;
      for (const choice of choices) {
        const ticked = choice.querySelector("input").checked;
        choice.hidden = !(ticked || names.includes(choice.dataset.choice));
        any = any || !choice.hidden;
      }
      none.hidden = any;
    }
    other.addEventListener("input", offer);
    widget.addEventListener("change", offer);
  }

  function enhance() {
    document.querySelectorAll("input[data-tags]").forEach(enhanceTags);
    document.querySelectorAll("[data-key-value-rows]").forEach(enhanceRows);
    document.querySelectorAll("[data-depends-on]").forEach(enhanceDependent);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", enhance);
  } else {
    enhance();
  }
})();
