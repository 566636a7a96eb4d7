// How Croniq's pages show an instant: "2026-12-05 09:00:00 CET", the date in
// ISO order, a 24-hour clock and the zone's abbreviation: the text the server
// writes (core/instants.py), in the viewer's timezone or a named one. Every
// script that shows a time goes through here (tests/core/test_instant_rule.py
// refuses the locale's own formats and formatters of a script's own): the
// browser's locale decides nothing, so "12/05/2026, 04:05:57 AM" never shows.
"use strict";

(function () {
  var formatters = {};

  // Numbers from one fixed locale ("en-US" with latin digits and hourCycle
  // h23: "00".."23"), put in ISO order by hand from formatToParts.
  function formatter(locale, zone) {
    var key = locale + " " + (zone || "");
    if (!formatters[key]) {
      formatters[key] = new Intl.DateTimeFormat(locale, {
        timeZone: zone || undefined,
        numberingSystem: "latn",
        year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
        timeZoneName: "short",
      });
    }
    return formatters[key];
  }

  function parts(date, locale, zone) {
    var found = {};
    formatter(locale, zone).formatToParts(date).forEach(function (part) {
      found[part.type] = part.value;
    });
    return found;
  }

  // The zone's abbreviation where the browser knows one: en-US names
  // America's zones (EST) and writes "GMT+1" for Berlin, en-GB names
  // Europe's (CET, as the server writes it); else "GMT+9".
  function zoneName(date, zone, first) {
    var name = first.timeZoneName;
    if (!/^GMT[+-]/.test(name)) return name;
    var british = parts(date, "en-GB", zone).timeZoneName;
    return /^GMT[+-]/.test(british) ? name : british;
  }

  // "2026-12-05 09:00:00 CET"; `zone` an IANA name, the viewer's without it.
  function format(date, zone) {
    var p = parts(date, "en-US", zone);
    // Some engines still write midnight as "24" under h23.
    var hour = p.hour === "24" ? "00" : p.hour;
    return p.year + "-" + p.month + "-" + p.day + " " + hour + ":" + p.minute + ":" + p.second +
      " " + zoneName(date, zone, p);
  }

  function viewerZone() {
    return formatter("en-US").resolvedOptions().timeZone;
  }

  window.CroniqInstants = { format: format, viewerZone: viewerZone };
})();
