// The report's results page: views of every direction of every model (bouquet_eval.views).
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const app = document.getElementById("app");
  const lower = new Set(data.lower);
  const names = data.languages;
  const english = data.english;
  const state = { view: "language", metric: data.primary, model: data.models[0] };
  if (data.versus) state.system = Object.keys(data.versus.systems)[0];

  function decimals(metric) {
    return data.decimals[metric];  // from the metric's record (results.views.results_data)
  }

  function number(value, metric) {
    return value === null || value === undefined ? "–" : value.toFixed(decimals(metric));
  }

  function language(code) {
    const info = names[code] || [code, "", ""];
    return { code: code, name: info[0], script: info[1], region: info[2] };
  }

  function score(metric, model, position) {
    const triple = (data.scores[metric] || {})[model];
    if (!triple) return { mean: null, low: null, high: null };
    return { mean: triple[0][position], low: triple[1][position], high: triple[2][position] };
  }

  function scoreCell(cell) {
    const value = cell.getValue();
    const row = cell.getRow().getData();
    const interval = row[cell.getField() + "~ci"];
    const text = number(value, state.metric);
    if (!interval || interval[0] === null) return text;
    // The interval under the score: five models' columns fit beside the report's menu.
    return text + '<br><span class="interval">[' + number(interval[0], state.metric) + "–" +
      number(interval[1], state.metric) + "]</span>";
  }

  function scoreColumn(title, field) {
    return {
      title: title, field: field, formatter: scoreCell, hozAlign: "right", sorter: "number",
      headerFilter: false, headerSortStartingDir: lower.has(state.metric) ? "desc" : "asc",
    };
  }

  function languageColumns(prefix, title) {
    return [
      { title: title, field: prefix + "name", headerFilter: "input", frozen: true, minWidth: 140 },
      { title: "code", field: prefix + "code", headerFilter: "input" },
      { title: "script", field: prefix + "script", headerFilter: "input" },
      { title: "region", field: prefix + "region", headerFilter: "input" },
    ];
  }

  function putScore(row, field, metric, model, position) {
    const value = score(metric, model, position);
    row[field] = value.mean;
    row[field + "~ci"] = [value.low, value.high];
  }

  function withLanguage(row, prefix, code) {
    const info = language(code);
    row[prefix + "name"] = info.name;
    row[prefix + "code"] = info.code;
    row[prefix + "script"] = info.script;
    row[prefix + "region"] = info.region;
    return row;
  }

  // One row per language other than English: into English (it is the source) and out of it.
  function languageView() {
    const rows = new Map();
    const regional = new Map();
    data.directions.forEach(([src, tgt], position) => {
      if (tgt === english && src !== english) {
        const row = rows.get(src) || withLanguage({}, "", src);
        putScore(row, "into", state.metric, state.model, position);
        rows.set(src, row);
      } else if (src === english && tgt !== english) {
        const row = rows.get(tgt) || withLanguage({}, "", tgt);
        putScore(row, "out", state.metric, state.model, position);
        rows.set(tgt, row);
      } else {
        [src, tgt].forEach((code) => regional.set(code, (regional.get(code) || 0) + 1));
      }
    });
    rows.forEach((row, code) => { row.regional = regional.get(code) || 0; });
    const columns = languageColumns("", "language").concat([
      scoreColumn("into English (" + state.model + ")", "into"),
      scoreColumn("out of English (" + state.model + ")", "out"),
      { title: "regional pairs", field: "regional", hozAlign: "right", sorter: "number" },
    ]);
    return { rows: Array.from(rows.values()), columns: columns, sort: "into" };
  }

  function directionRow(src, tgt, count) {
    const row = withLanguage(withLanguage({ direction: src + "-" + tgt }, "src_", src), "tgt_", tgt);
    row.kind = src === english ? "out of English" : tgt === english ? "into English" : "regional";
    row.languages = row.src_name + " → " + row.tgt_name;
    row.sentences = count;
    return row;
  }

  function directionColumns() {
    return [
      { title: "direction", field: "direction", headerFilter: "input", frozen: true },
      { title: "languages", field: "languages", headerFilter: "input", maxWidth: 220,
        formatter: "textarea" },
      { title: "kind", field: "kind", headerFilter: "list", maxWidth: 120,
        headerFilterParams: { values: ["", "into English", "out of English", "regional"] } },
      { title: "sentences", field: "sentences", hozAlign: "right", sorter: "number",
        maxWidth: 95 },
    ];
  }

  // Every direction (or only the regional ones) with every model's score on the metric.
  function directionView(regionalOnly) {
    const rows = [];
    data.directions.forEach(([src, tgt, count], position) => {
      if (regionalOnly && (src === english || tgt === english)) return;
      const row = directionRow(src, tgt, count);
      data.models.forEach((model, m) => putScore(row, "m" + m, state.metric, model, position));
      rows.push(row);
    });
    const columns = directionColumns().concat(
      data.models.map((model, m) => scoreColumn(model, "m" + m)));
    return { rows: rows, columns: columns, sort: "m0" };
  }

  // One model against the baseline, per direction: difference, raw and corrected p-values.
  function versusView() {
    const versus = data.versus;
    const triple = versus.systems[state.system];
    const better = lower.has(versus.metric) ? -1 : 1;
    const rows = data.directions.map(([src, tgt, count], position) => {
      const row = directionRow(src, tgt, count);
      row.delta = triple[0][position];
      row.p = triple[1][position];
      row.q = triple[2][position];
      row.verdict = row.q === null ? "" : row.q >= 0.05 ? "no significant difference" :
        row.delta * better > 0 ? "better" : "worse";
      return row;
    });
    const columns = directionColumns().concat([
      { title: "Δ " + versus.metric, field: "delta",
        headerTooltip: versus.metric + ": " + state.system + " − " + versus.baseline,
        hozAlign: "right", sorter: "number",
        formatter: (cell) => {
          const value = cell.getValue();
          if (value === null) return "–";
          const css = value * better > 0 ? "gain" : value * better < 0 ? "loss" : "";
          return '<span class="' + css + '">' + (value > 0 ? "+" : "") +
            number(value, versus.metric) + "</span>";
        } },
      { title: "p", headerTooltip: "paired bootstrap p-value", field: "p", hozAlign: "right", sorter: "number",
        formatter: (cell) => cell.getValue() === null ? "–" : cell.getValue().toPrecision(2) },
      { title: "p (BH)", headerTooltip: "p-value corrected by Benjamini-Hochberg", field: "q", hozAlign: "right", sorter: "number",
        formatter: (cell) => cell.getValue() === null ? "–" : cell.getValue().toPrecision(2) },
      { title: "at 5%, corrected", field: "verdict", headerFilter: "list",
        headerFilterParams: { values: ["", "better", "worse", "no significant difference"] } },
    ]);
    const counts = { better: 0, worse: 0 };
    rows.forEach((row) => { if (row.verdict in counts) counts[row.verdict] += 1; });
    const summary = "Δ = " + state.system + " − " + versus.baseline + " on " + versus.metric + ": " +
      counts.better + " directions better, " + counts.worse + " worse, " +
      (rows.length - counts.better - counts.worse) + " without a significant difference " +
      "(paired bootstrap, Benjamini-Hochberg over the " + rows.length + " directions, 5%).";
    return { rows: rows, columns: columns, sort: "delta", summary: summary };
  }

  const views = {
    language: ["Into and out of English", languageView],
    regional: ["Regional pairs", () => directionView(true)],
    directions: ["All directions", () => directionView(false)],
  };
  if (data.versus) views.versus = ["Against " + data.versus.baseline, versusView];

  function select(label, key, options) {
    const node = element("select", { "data-control": key });
    options.forEach((option) => {
      const item = element("option", { value: option[0] }, [option[1]]);
      if (option[0] === state[key]) item.selected = true;
      node.append(item);
    });
    node.addEventListener("change", () => { state[key] = node.value; draw(); });
    return element("label", {}, [label + " ", node]);
  }

  const tabs = element("nav", { class: "tabs" });
  const controls = element("div", { class: "controls" });
  const summary = element("p", { class: "summary" });
  const holder = element("div", { id: "table" });
  app.append(tabs, controls, summary, holder);
  let table = null;

  function draw() {
    tabs.replaceChildren(...Object.entries(views).map(([key, [title]]) => {
      const tab = element("button", { "data-view": key, class: key === state.view ? "active" : "" },
        [title]);
      tab.addEventListener("click", () => { state.view = key; draw(); });
      return tab;
    }));
    const chosen = [];
    if (state.view !== "versus") {
      chosen.push(select("metric", "metric", data.metrics.map((m) =>
        [m, m + (lower.has(m) ? " (lower is better)" : " (higher is better)")])));
    }
    if (state.view === "language") {
      chosen.push(select("model", "model", data.models.map((m) => [m, m])));
    }
    if (state.view === "versus") {
      chosen.push(select("model", "system",
        Object.keys(data.versus.systems).map((m) => [m, m])));
    }
    controls.replaceChildren(...chosen);
    const view = views[state.view][1]();
    summary.textContent = view.summary || "";
    if (table) table.destroy();
    holder.replaceChildren();
    table = new Tabulator(holder, {
      data: view.rows,
      columns: view.columns,
      layout: "fitDataTable",
      height: "75vh",
      nestedFieldSeparator: false,
      initialSort: [{ column: view.sort, dir: lower.has(state.metric) ? "asc" : "desc" }],
      placeholder: "No direction of this kind in this run",
    });
    app.dataset.view = state.view;
    table.on("tableBuilt", () => { app.dataset.rows = String(view.rows.length); });
  }

  // A link may open a view directly: results.html#regional.
  const wanted = window.location.hash.slice(1);
  if (wanted in views) state.view = wanted;
  draw();
})();
