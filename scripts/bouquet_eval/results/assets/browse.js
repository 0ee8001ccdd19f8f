// The sentence browser (bouquet_eval.browse): every sentence of a direction, from the server.
"use strict";
(function () {
  const app = document.getElementById("app");
  const state = { direction: "", metric: "", model: "", versus: "", facets: {}, text: "" };
  let info = null;
  let current = null;

  function select(label, key, options, onChange) {
    const node = element("select", { "data-control": key });
    options.forEach(([value, text]) => {
      const option = element("option", { value: value }, [text]);
      if (value === state[key]) option.selected = true;
      node.append(option);
    });
    node.addEventListener("change", () => { state[key] = node.value; onChange(); });
    return element("label", {}, [label + " ", node]);
  }

  const lower = () => new Set(info.lower).has(state.metric);
  const score = (row, model) => row[state.metric + "|" + model];
  const format = (value) => value === null || value === undefined ? "–" :
    (Math.abs(value) <= 1 ? value.toFixed(3) : value.toFixed(2));

  const directionBox = element("input", { list: "directions", id: "direction", size: "50",
    placeholder: "type a language name or code" });
  const controls = element("div", { class: "controls" });
  const status = element("p", { class: "summary", id: "status" });
  const holder = element("div", { id: "sentences" });

  function visible() {
    const needle = state.text.toLowerCase();
    return current.rows.filter((row) =>
      Object.entries(state.facets).every(([facet, value]) => !value || row[facet] === value) &&
      (!needle || [row.src_text, row.ref_text]
        .concat(info.models.map((m) => row["mt_text|" + m]))
        .some((text) => (text || "").toLowerCase().includes(needle))));
  }

  // Worst first for the chosen model; side by side, the largest difference first.
  function ordered(rows) {
    const sign = lower() ? -1 : 1;
    const key = state.versus ?
      (row) => -Math.abs((score(row, state.versus) ?? 0) - (score(row, state.model) ?? 0)) :
      (row) => sign * (score(row, state.model) ?? Infinity);
    return rows.slice().sort((a, b) => key(a) - key(b));
  }

  function drawControls() {
    const facets = (current ? current.facets : []).map((facet) => {
      const values = Array.from(new Set(current.rows.map((row) => row[facet])))
        .filter((v) => v !== null).sort();
      return select(facet, "facet:" + facet, [["", "all"]].concat(values.map((v) => [v, v])),
        () => { state.facets[facet] = state["facet:" + facet]; drawTable(); });
    });
    const search = element("input", { type: "search", placeholder: "text contains",
      value: state.text, "data-control": "text" });
    search.addEventListener("input", () => { state.text = search.value; drawTable(); });
    controls.replaceChildren(
      select("metric", "metric", info.metrics.map((m) =>
        [m, m + (new Set(info.lower).has(m) ? " (lower is better)" : "")]), drawTable),
      select("worst first for", "model", info.models.map((m) => [m, m]), drawTable),
      select("side by side with", "versus", [["", "(every model)"]].concat(
        info.models.map((m) => [m, m])), drawTable),
      ...facets, element("label", {}, ["search ", search]));
  }

  const SEVERITIES = new Set(["minor", "major", "critical"]);
  const spanTitle = (span) => span.severity + " error, confidence " + format(span.confidence);

  const severity = (span) => SEVERITIES.has(span.severity) ? span.severity : "other";

  // A translation with xCOMET's error spans marked where the server placed them (code point
  // offsets, hence Array.from); every text goes in as a text node.
  function marked(text, spans) {
    const points = Array.from(text);
    const nodes = [];
    let at = 0;
    spans.filter((span) => span.start !== null).sort((a, b) => a.start - b.start)
      .forEach((span) => {
        nodes.push(points.slice(at, span.start).join(""),
          element("mark", { class: "error " + severity(span), title: spanTitle(span) },
            [points.slice(span.start, span.end).join("")]));
        at = span.end;
      });
    return nodes.concat([points.slice(at).join("")]);
  }

  // The spans listed under the translation's score, those not found in it included.
  const spanList = (spans) => element("ul", { class: "spans" }, spans.map((span) =>
    element("li", { class: severity(span) }, [span.severity + " (" + format(span.confidence) +
      "): ", element("q", {}, [span.text.trim()]),
      span.start === null ? " (not found in the translation)" : ""])));

  function drawTable() {
    if (!current) return;
    const rows = ordered(visible());
    const models = state.versus ? [state.model, state.versus] : info.models;
    const head = ["id"].concat(current.facets, ["source", "reference"],
      models.map((m) => m + " (" + state.metric + ")"), state.versus ? ["difference"] : []);
    const body = rows.map((row) => {
      const keys = [row.uniq_id].concat(current.facets.map((f) => row[f] || ""));
      const cells = keys.map((text) => element("td", { class: "key" }, [String(text)])).concat(
        [row.src_text, row.ref_text].map((text) =>
          element("td", { dir: "auto" }, [String(text ?? "")])));
      models.forEach((model) => {
        const spans = row["xcomet_error_spans|" + model] || [];
        cells.push(element("td", { dir: "auto" }, marked(row["mt_text|" + model] || "", spans)
          .concat([element("br"), element("span", { class: "score" },
            [format(score(row, model))])], spans.length ? [spanList(spans)] : [])));
      });
      if (state.versus) {
        const difference = (score(row, state.versus) ?? NaN) - (score(row, state.model) ?? NaN);
        const better = (lower() ? -1 : 1) * difference;
        cells.push(element("td", { class: "difference " +
          (better > 0 ? "gain" : better < 0 ? "loss" : "") },
          [isNaN(difference) ? "–" : (difference > 0 ? "+" : "") + format(difference)]));
      }
      return element("tr", { "data-id": row.uniq_id }, cells);
    });
    holder.replaceChildren(element("table", { class: "sentences" }, [
      element("thead", {}, [element("tr", {}, head.map((h) => element("th", {}, [h])))]),
      element("tbody", {}, body)]));
    status.textContent = rows.length + " of " + current.rows.length + " sentences of " +
      current.direction + (state.versus ? ", " + state.versus + " − " + state.model : "") + ".";
    app.dataset.shown = String(rows.length);
  }

  async function open(direction) {
    const started = performance.now();
    const reply = await fetch("/api/sentences?direction=" + encodeURIComponent(direction));
    const answer = await reply.json();
    if (answer.error) { status.textContent = answer.error; return; }
    current = answer;
    state.direction = direction;
    state.facets = {};
    drawControls();
    drawTable();
    app.dataset.direction = direction;
    app.dataset.milliseconds = String(Math.round(performance.now() - started));
  }

  async function start() {
    info = await (await fetch("/api/directions")).json();
    state.metric = info.primary || info.metrics[0] || "";
    state.model = info.models[0];
    const names = Object.keys(info.directions);
    const list = element("datalist", { id: "directions" }, names.map((name) => {
      const entry = info.directions[name];
      return element("option", { value: name }, [entry.src + " → " + entry.tgt]);
    }));
    directionBox.addEventListener("change", () => open(directionBox.value.trim()));
    app.append(element("label", {}, ["direction ", directionBox]), list, controls, status, holder);
    drawControls();
    const wanted = new URLSearchParams(window.location.search).get("direction") || names[0];
    if (wanted) { directionBox.value = wanted; await open(wanted); }
    app.dataset.ready = "true";
  }

  start();
})();
