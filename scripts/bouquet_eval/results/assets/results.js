// The report's results page: views of every direction of every model (bouquet_eval.views).
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const app = document.getElementById("app");
  const lower = new Set(data.lower);
  const targets = data.targets;  // a column whose best value is a target: the closest is best
  const names = data.languages;
  const english = data.english;
  const state = { view: "language", metric: data.primary, model: data.models[0] };
  if (data.versus) state.system = Object.keys(data.versus.systems)[0];

  function decimals(metric) {
    return data.decimals[metric];  // from the metric's record (results.views.results_data)
  }

  // Whether a column's best values sort first ascending: the lowest, or the closest to a target.
  function ascending(metric) {
    return lower.has(metric) || metric in targets;
  }

  function better(metric) {
    if (metric in targets) return " (closest to " + targets[metric] + " is best)";
    return lower.has(metric) ? " (lower is better)" : " (higher is better)";
  }

  // A column with a target sorts by the distance to it (a missing score the farthest).
  function sorter(metric) {
    if (!(metric in targets)) return "number";
    const distance = (value) =>
      value === null || value === undefined ? Infinity : Math.abs(value - targets[metric]);
    return (a, b) => {
      const [x, y] = [distance(a), distance(b)];
      return x === y ? 0 : x < y ? -1 : 1;
    };
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
    // The interval under the score: six models' columns fit beside the report's menu. A node,
    // not HTML: Tabulator puts a formatter's string in as HTML.
    return element("span", {}, [text, element("br"), element("span", { class: "interval" },
      ["[" + number(interval[0], state.metric) + "–" + number(interval[1], state.metric) + "]"])]);
  }

  function scoreColumn(title, field) {
    return {
      title: title, field: field, formatter: scoreCell, hozAlign: "right",
      sorter: sorter(state.metric), headerFilter: false,
      headerSortStartingDir: ascending(state.metric) ? "desc" : "asc",
      // A title wraps where it breaks (a space, a hyphen): the columns stay narrow.
      headerWordWrap: true, maxWidth: 95,
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

  // The direction's code with its languages' names under it, in one frozen column whose
  // filter finds either: every model's column stays beside it in the report's frame.
  function directionCell(cell) {
    const row = cell.getRow().getData();
    return element("span", {}, [row.direction, element("br"),
      element("span", { class: "names" }, [row.languages])]);
  }

  function directionColumns() {
    return [
      { title: "direction", field: "direction", headerFilter: "input", frozen: true,
        formatter: directionCell, width: 175, variableHeight: true,
        headerFilterFunc: (term, value, row) =>
          (row.direction + " " + row.languages).toLowerCase().includes(term.toLowerCase()) },
      { title: "kind", field: "kind", headerFilter: "list", maxWidth: 110,
        headerFilterParams: { values: ["", "into English", "out of English", "regional"] } },
      { title: "sentences", field: "sentences", hozAlign: "right", sorter: "number", width: 112 },
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
    // Positive where the model is better than the baseline: a higher score, a lower one, or
    // one closer to the metric's target.
    const gain = (position) => {
      const delta = triple[0][position];
      if (delta === null) return null;
      if (!(versus.metric in targets)) return lower.has(versus.metric) ? -delta : delta;
      const base = score(versus.metric, versus.baseline, position).mean;
      const own = score(versus.metric, state.system, position).mean;
      if (base === null || own === null) return null;
      return Math.abs(base - targets[versus.metric]) - Math.abs(own - targets[versus.metric]);
    };
    const rows = data.directions.map(([src, tgt, count], position) => {
      const row = directionRow(src, tgt, count);
      row.delta = triple[0][position];
      row.gain = gain(position);
      row.p = triple[1][position];
      row.q = triple[2][position];
      row.verdict = row.q === null || row.gain === null ? "" :
        row.q >= 0.05 ? "no significant difference" : row.gain > 0 ? "better" : "worse";
      return row;
    });
    const columns = directionColumns().concat([
      { title: "Δ " + versus.metric, field: "delta",
        headerTooltip: versus.metric + ": " + state.system + " − " + versus.baseline,
        hozAlign: "right", sorter: "number",
        formatter: (cell) => {
          const value = cell.getValue();
          if (value === null) return "–";
          const gained = cell.getRow().getData().gain;
          const css = gained > 0 ? "gain" : gained < 0 ? "loss" : "";
          return element("span", { class: css },
            [(value > 0 ? "+" : "") + number(value, versus.metric)]);
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
    // The largest gains first, those without a test last.
    const order = (row) => (row.gain === null ? -Infinity : row.gain);
    rows.sort((a, b) => order(b) - order(a) || 0);
    return { rows: rows, columns: columns, sort: null, summary: summary };
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
        [m, m + better(m)])));
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
      // As wide as the page, however many models: the table scrolls sideways within itself,
      // the direction (or language) column frozen, so that no column is out of reach.
      layout: "fitData",
      height: "75vh",
      nestedFieldSeparator: false,
      // Tabulator puts a title in as HTML; a model's name is text.
      columnDefaults: { titleFormatter: "plaintext" },
      initialSort: view.sort === null ? [] :
        [{ column: view.sort, dir: ascending(state.metric) ? "asc" : "desc" }],
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
