// "Which metric to trust": every metric's pooled agreement (over every direction, into and out
// of English, inside and outside each learned metric's training languages), then every
// direction's best metric in a Tabulator table (sortable, filterable), or only those where the
// headline metric disagrees with people.
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const app = document.getElementById("app");
  const fixed = (value) => (value === null ? "–" : value.toFixed(3));
  const interval = (row) => `${fixed(row.value)} [${fixed(row.low)}–${fixed(row.high)}]`;

  // One row per pool, one column per metric: its agreement, interval, Kendall's tau-b and
  // system-level accuracy; the best of the row marked.
  const cell = (value) => value === null ? element("td", {}, ["–"]) : element("td",
    value.best ? { class: "best" } : {}, [
      interval(value) + (value.best ? " ★" : ""), element("br", {}, []),
      element("small", {}, [`τ ${fixed(value.kendall)} · systems ${fixed(value.system_accuracy)}`]),
    ]);
  const poolRows = data.pools.map((row) => element("tr", row.training ? { class: "training" } : {}, [
    element("td", { class: "name" }, [row.pool]),
    element("td", {}, [String(row.directions)]), element("td", {}, [String(row.segments)]),
    ...row.values.map(cell),
  ]));
  app.append(
    element("h2", {}, ["Pooled agreement"]),
    element("table", { id: "pooled" }, [
      element("thead", {}, [element("tr", {}, [
        element("th", { class: "name" }, ["pool"]), element("th", {}, ["directions"]),
        element("th", {}, ["segments"]),
        ...data.metrics.map((metric) => element("th", {}, [
          metric, element("br", {}, []), element("small", {}, [`${data.statistic} [95%]`]),
        ])),
      ])]),
      element("tbody", {}, poolRows),
    ]),
  );
  app.append(element("h2", {}, ["Per direction"]));

  const tabs = element("div", { class: "tabs" }, []);
  const holder = element("div", {}, []);
  app.append(tabs, holder);
  const views = {
    all: { label: `Every direction (${data.directions.length})`, rows: data.directions },
    disagree: {
      label: `Where ${data.headline} disagrees with people (${data.disagreeing})`,
      rows: data.directions.filter((row) => row.headline.startsWith("significantly worse") ||
        row.headline.startsWith("no significant")),
    },
  };
  const text = (title, field, width) => ({ title, field, headerFilter: "input", width });
  // The decision first, then what the direction is: the page stays readable on a laptop.
  const columns = [
    text("direction", "direction"),
    text("best metric", "best"),
    { title: `${data.statistic} [95%]`, field: "value", hozAlign: "right",
      formatter: (cell) => interval(cell.getRow().getData()) },
    { title: "lead", field: "margin", hozAlign: "right", formatter: (cell) => fixed(cell.getValue()) },
    text("next", "runner_up"),
    { title: "better than all", field: "significant",
      formatter: (cell) => (cell.getValue() === null ? "–" : cell.getValue() ? "yes" : "no") },
    text(`${data.headline} (headline)`, "headline"),
    text("unseen by", "unseen_by", 200),
    text("source", "source"), text("script", "source_script"), text("region", "source_region"),
    text("target", "target"), text("script", "target_script"), text("region", "target_region"),
    { title: "segments", field: "segments", hozAlign: "right" },
    { title: "systems", field: "systems", hozAlign: "right" },
  ];
  let table = null;
  function draw(name) {
    tabs.replaceChildren(...Object.entries(views).map(([key, view]) => {
      const button = element("button", key === name ? { class: "active" } : {}, [view.label]);
      button.addEventListener("click", () => draw(key));
      return button;
    }));
    if (table) table.destroy();
    table = new Tabulator(holder, {
      // As wide as the page: the table scrolls sideways within itself.
      data: views[name].rows, columns, layout: "fitData", height: "70vh",
      // Tabulator puts a title in as HTML; a metric's name is text.
      columnDefaults: { titleFormatter: "plaintext" },
      initialSort: [{ column: "value", dir: "desc" }],
      placeholder: "No direction here",
    });
    app.dataset.view = name;
    table.on("tableBuilt", () => { app.dataset.rows = String(views[name].rows.length); });
  }
  draw(window.location.hash.slice(1) in views ? window.location.hash.slice(1) : "all");
})();
